/* onebit_abi.h: the C ABI through which onebit holds a compiled speculative loop, or a
 * compiled base model, to its contract. Version 1. docs/c-abi.md explains every field.
 *
 * Names, layouts and meanings are fixed for a version; any change is a new version.
 * A library exports `onebit_abi_version` (an int32_t equal to ONEBIT_ABI_VERSION) so the
 * harness can refuse a library built against another version. */
#ifndef ONEBIT_ABI_H
#define ONEBIT_ABI_H

#include <stdint.h>

#define ONEBIT_ABI_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* Every callback returns 0 on success, anything else on failure. */
typedef struct onebit_base {
    void *self;
    int32_t vocab_size;
    int32_t hidden_size;
    int32_t (*max_batch_rows)(void *self, int32_t *rows);
    int32_t (*max_prefill_rows)(void *self, int32_t *rows);      /* may be NULL */
    int32_t (*reset)(void *self);
    /* Run token at pos (the committed length) and commit it.
       Writes vocab_size floats: the scores for position pos + 1. */
    int32_t (*step)(void *self, int32_t token, int32_t pos, float *logits);
    /* Run tokens[0..n) at pos .. pos + n - 1, provisionally.
       Writes n * vocab_size floats, row-major: row i scores position pos + i + 1. */
    int32_t (*verify)(void *self, const int32_t *tokens, int32_t n, int32_t pos, float *logits);
    /* Keep the first n rows of the last verify; forget the rest. */
    int32_t (*commit_verify)(void *self, int32_t n);
    int32_t (*last_hidden)(void *self, float *hidden);            /* hidden_size floats */
    /* Hidden rows of the last verify: writes *n_rows rows of hidden_size floats (never more
       rows than that verify took; the caller's buffer holds that many). */
    int32_t (*last_hidden_rows)(void *self, float *rows, int32_t *n_rows);
} onebit_base;

typedef struct onebit_head {
    void *self;
    int32_t (*needs_last_hidden)(void *self, int32_t *needs);    /* 1: two-pass; 0: one-pass */
    /* Up to k drafts for positions pos + 1 .. pos + k; token is t1 at pos. hidden is the
       base's hidden after t1 for a two-pass head, NULL for a one-pass head. Writes the drafts
       and their count (0..k). */
    int32_t (*propose)(void *self, int32_t token, int32_t pos, int32_t k, const float *hidden,
                       int32_t *drafts, int32_t *n_drafts);
    /* tokens[0..count) are committed, with hidden rows rows[0..count) (hidden_size each). */
    int32_t (*commit_rows)(void *self, const int32_t *tokens, const float *rows, int32_t count);
    int32_t (*reset)(void *self);
} onebit_head;

/* Called once per emitted token, in order. Return 1 to go on, 0 to stop after this token. */
typedef int32_t (*onebit_on_token)(void *ctx, int32_t token);

typedef struct onebit_stats {          /* the fields of onebit.RunStats, same meaning */
    int64_t rounds, steps, batches, batch_rows, proposed, accepted, emitted;
    int64_t prefill_steps, prefill_batches, prefill_rows, drafts_asked;
} onebit_stats;

/* The loop under test. head == NULL: plain decode. Writes the emitted tokens to out (room for
   max_tokens) and their count to *n_out, on success and on failure alike. *stopped is 1 when
   on_token asked to stop. Returns 0, or a negative status when a callback failed or a part
   returned something unusable. Whatever was emitted before the failure stays in out. */
typedef int32_t (*onebit_run_fn)(const onebit_base *base, const onebit_head *head,
                                 const int32_t *prompt, int32_t prompt_len,
                                 int32_t max_tokens, int32_t k,
                                 onebit_on_token on_token, void *ctx,
                                 int32_t *out, int32_t *n_out, int32_t *stopped,
                                 onebit_stats *stats);

/* Every library the harness loads defines this as ONEBIT_ABI_VERSION:
       const int32_t onebit_abi_version = ONEBIT_ABI_VERSION; */
extern const int32_t onebit_abi_version;

/* A compiled base for the base contract: make a fresh one, free it. */
typedef onebit_base *(*onebit_make_base_fn)(void);
typedef void (*onebit_free_base_fn)(onebit_base *base);

#ifdef __cplusplus
}
#endif

#endif /* ONEBIT_ABI_H */
