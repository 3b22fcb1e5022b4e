/* A compiled toy base for the base contract (B1..B7), C ABI version 1: the same idea as
 * pytest_onebit/toy.py in C. Its state is a 64-bit hash of every (token, position) committed;
 * its hidden row is hashed from the state (values exact in float32); its logits are a fixed
 * matrix times the hidden row, computed row by row by the same code for step and verify, so a
 * verify is bit for bit a run of steps. It refuses misuse with a non-zero status.
 *
 * Compiled with TOY_BROKEN_COMMIT (broken_base.c) it keeps the whole batch's state on a partial
 * commit_verify: the bug base check B2 exists for. */
#include <onebit_abi.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB 64
#define HIDDEN 16
#define ROWS 4      /* max_batch_rows() */
#define PREFILL 8   /* max_prefill_rows(): a wider prefill batch */

const int32_t onebit_abi_version = ONEBIT_ABI_VERSION;

typedef struct toy {
    onebit_base vt;
    float unembed[VOCAB * HIDDEN];
    uint64_t state;
    int32_t committed;
    int32_t pending;  /* rows of the uncommitted verify; 0: none */
    int32_t pending_pos;
    uint64_t states[PREFILL];
    float rows[PREFILL * HIDDEN];  /* hidden rows of the last verify */
    int32_t kept;  /* rows of it committed (what last_hidden_rows shows) */
} toy;

static uint64_t finish(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t mix(uint64_t state, int32_t token, int32_t pos) {
    return finish(state ^ ((uint64_t)(token + 1) * 0x9E3779B97F4A7C15ULL) ^
                  ((uint64_t)(pos + 1) * 0xC2B2AE3D27D4EB4FULL));
}

static void hidden_of(uint64_t state, float *row) {
    for (int j = 0; j < HIDDEN; ++j) {
        uint64_t z = finish(state + (uint64_t)(j + 1) * 0x9E3779B97F4A7C15ULL);
        row[j] = (float)((double)(z >> 40) * (1.0 / 8388608.0) - 1.0);  /* exact in float32 */
    }
}

static void logits_of(const toy *t, const float *row, float *logits) {
    for (int v = 0; v < VOCAB; ++v) {
        float sum = 0.0f;
        for (int j = 0; j < HIDDEN; ++j) sum += t->unembed[v * HIDDEN + j] * row[j];
        logits[v] = sum;
    }
}

static int32_t rows(void *self, int32_t *out) { (void)self; *out = ROWS; return 0; }
static int32_t prefill_rows(void *self, int32_t *out) { (void)self; *out = PREFILL; return 0; }

static int32_t reset(void *self) {
    toy *t = self;
    t->state = 0, t->committed = 0, t->pending = 0, t->kept = 0;
    return 0;
}

static int32_t step(void *self, int32_t token, int32_t pos, float *logits) {
    toy *t = self;
    if (token < 0 || token >= VOCAB || pos != t->committed) return 1;
    t->pending = 0;  /* an uncommitted batch is forgotten by the next pass */
    t->state = mix(t->state, token, pos);
    t->committed += 1;
    float row[HIDDEN];
    hidden_of(t->state, row);
    logits_of(t, row, logits);
    return 0;
}

static int32_t verify(void *self, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    toy *t = self;
    if (n < 1 || n > PREFILL || pos != t->committed) return 1;
    for (int32_t i = 0; i < n; ++i)
        if (tokens[i] < 0 || tokens[i] >= VOCAB) return 1;
    uint64_t state = t->state;
    for (int32_t i = 0; i < n; ++i) {
        state = mix(state, tokens[i], pos + i);
        t->states[i] = state;
        hidden_of(state, t->rows + i * HIDDEN);
        logits_of(t, t->rows + i * HIDDEN, logits + (size_t)i * VOCAB);
    }
    t->pending = n, t->pending_pos = pos;
    return 0;
}

static int32_t commit_verify(void *self, int32_t n) {
    toy *t = self;
    if (t->pending == 0 || n < 0 || n > t->pending) return 1;
#ifdef TOY_BROKEN_COMMIT
    if (n) t->state = t->states[t->pending - 1];  /* the bug: the whole batch's state */
#else
    if (n) t->state = t->states[n - 1];
#endif
    t->committed += n;
    t->kept = n;
    t->pending = 0;
    return 0;
}

static int32_t last_hidden(void *self, float *hidden) {
    hidden_of(((toy *)self)->state, hidden);
    return 0;
}

static int32_t last_hidden_rows(void *self, float *out, int32_t *n_rows) {
    toy *t = self;
    memcpy(out, t->rows, sizeof(float) * (size_t)t->kept * HIDDEN);
    *n_rows = t->kept;
    return 0;
}

onebit_base *onebit_make_base(void) {
    toy *t = calloc(1, sizeof *t);
    if (t == NULL) return NULL;
    uint64_t seed = 12345;
    for (int i = 0; i < VOCAB * HIDDEN; ++i) {  /* a fixed matrix in [-1, 1), float32-exact */
        seed = finish(seed + 0x9E3779B97F4A7C15ULL);
        t->unembed[i] = (float)((double)(seed >> 40) * (1.0 / 8388608.0) - 1.0);
    }
    t->vt = (onebit_base){t, VOCAB, HIDDEN, rows, prefill_rows, reset, step, verify,
                          commit_verify, last_hidden, last_hidden_rows};
    reset(t);
    return &t->vt;
}

void onebit_free_base(onebit_base *base) {
    free(base == NULL ? NULL : base->self);
}
