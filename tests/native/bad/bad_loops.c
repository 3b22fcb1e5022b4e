/* Loops that break the ABI in the ways a harness must survive, one exported function each
 * (held as bad_loops.so:SYMBOL). There is deliberately no `onebit_run` here, so the default
 * symbol is missing. */
#include <onebit_abi.h>
#include <string.h>

const int32_t onebit_abi_version = ONEBIT_ABI_VERSION;

#define RUN_ARGS const onebit_base *b, const onebit_head *h, const int32_t *prompt, \
    int32_t prompt_len, int32_t max_tokens, int32_t k, onebit_on_token on_token, void *ctx, \
    int32_t *out, int32_t *n_out, int32_t *stopped, onebit_stats *st

/* Claims one token more than max_tokens (but writes none past out). */
int32_t too_many(RUN_ARGS) {
    (void)b, (void)h, (void)prompt, (void)prompt_len, (void)k, (void)on_token, (void)ctx;
    memset(st, 0, sizeof *st);
    for (int32_t i = 0; i < max_tokens; ++i) out[i] = 0;
    *n_out = max_tokens + 1;
    *stopped = 0;
    return 0;
}

/* Writes one token past the end of out. */
int32_t past_out(RUN_ARGS) {
    (void)b, (void)h, (void)prompt, (void)prompt_len, (void)k, (void)on_token, (void)ctx;
    memset(st, 0, sizeof *st);
    out[max_tokens] = 7;
    *n_out = 0;
    *stopped = 0;
    return 0;
}

/* Never returns. */
int32_t hangs(RUN_ARGS) {
    (void)b, (void)h, (void)prompt, (void)prompt_len, (void)max_tokens, (void)k;
    (void)on_token, (void)ctx, (void)out, (void)n_out, (void)stopped, (void)st;
    for (volatile int spin = 1; spin;) {
    }
    return 0;
}

/* Dereferences NULL. */
int32_t segfaults(RUN_ARGS) {
    (void)b, (void)h, (void)prompt, (void)prompt_len, (void)max_tokens, (void)k;
    (void)on_token, (void)ctx, (void)out, (void)n_out, (void)stopped, (void)st;
    volatile int32_t *nowhere = NULL;
    return *nowhere;
}
