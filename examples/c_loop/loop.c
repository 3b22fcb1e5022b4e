/* The smallest speculative loop that keeps onebit's contract, in C (C ABI version 1).
 *
 *   cc -std=c11 -O2 -shared -fPIC -I"$(python -c 'import onebit.abi as a; print(a.include_dir())')" \
 *      loop.c -o /tmp/loop.so
 *   onebit prove --loop-lib /tmp/loop.so
 *
 * Batched prefill, then rounds: one-pass (t1 rides in the verify batch as row 0) or two-pass
 * (t1 is stepped first, the head reads the hidden after it). docs/contract.md has the rules. */
#include <onebit_abi.h>
#include <stdlib.h>
#include <string.h>

const int32_t onebit_abi_version = ONEBIT_ABI_VERSION;

#define TRY(call) do { if ((call) != 0) { status = -1; goto done; } } while (0)
#define MIN(a, b) ((a) < (b) ? (a) : (b))

static int32_t argmax(const float *row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) if (row[i] > row[best]) best = i;
    return best;
}

int32_t onebit_run(const onebit_base *b, const onebit_head *h, const int32_t *prompt,
                   int32_t prompt_len, int32_t max_tokens, int32_t k, onebit_on_token on_token,
                   void *ctx, int32_t *out, int32_t *n_out, int32_t *stopped, onebit_stats *st) {
    int32_t status = 0, rows = 0, width = 0, two_pass = 0, t1 = 0, pos = 0, n = 0;
    const int32_t V = b->vocab_size, H = b->hidden_size;
    float *logits = NULL, *hid = NULL, *prompt_rows = NULL;
    int32_t *batch = NULL, *choice = NULL;
    memset(st, 0, sizeof *st);
    *n_out = 0, *stopped = 0;
    if (b->max_batch_rows(b->self, &rows) != 0 || rows < 1) return -1;
    width = rows;
    if (b->max_prefill_rows && (b->max_prefill_rows(b->self, &width) != 0 || width < 1))
        return -1;
    int32_t wide = width > rows ? width : rows;
    logits = malloc(sizeof(float) * (size_t)wide * V);
    hid = malloc(sizeof(float) * (size_t)wide * H);
    prompt_rows = malloc(sizeof(float) * (size_t)prompt_len * H);
    batch = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    choice = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    if (!logits || !hid || !prompt_rows || !batch || !choice) { status = -2; goto done; }

    /* Prefill: the prompt in batches of `width`, each committed whole. */
    TRY(b->reset(b->self));
    if (h) TRY(h->reset(h->self));
    for (int32_t at = 0; at < prompt_len; at += width) {
        int32_t m = MIN(width, prompt_len - at), got = 0;
        TRY(b->verify(b->self, prompt + at, m, at, logits));
        TRY(b->commit_verify(b->self, m));
        st->prefill_batches++, st->prefill_rows += m;
        if (h) {
            TRY(b->last_hidden_rows(b->self, hid, &got));
            if (got < m) { status = -3; goto done; }
            memcpy(prompt_rows + (size_t)at * H, hid, sizeof(float) * (size_t)m * H);
        }
        t1 = argmax(logits + (size_t)(m - 1) * V, V);
    }
    if (h) TRY(h->commit_rows(h->self, prompt, prompt_rows, prompt_len));
    if (h) TRY(h->needs_last_hidden(h->self, &two_pass));
    pos = prompt_len;

#define EMIT(tok) (out[(*n_out)++] = (tok), st->emitted++, \
                   (!on_token || on_token(ctx, (tok))) ? 1 : (*stopped = 1, 0))
    while (*n_out < max_tokens && !*stopped) {
        int32_t left = max_tokens - *n_out, room = 0, first = 0, going = 1, count = 0, got = 0;
        st->rounds++;
        n = 0;
        if (h && two_pass) {  /* step t1, then drafts from the hidden after it */
            TRY(b->step(b->self, t1, pos, logits));
            st->steps++;
            going = EMIT(t1);
            TRY(b->last_hidden(b->self, hid));
            TRY(h->commit_rows(h->self, &t1, hid, 1));
            pos++;
            if (!going) break;
            int32_t bonus = argmax(logits, V);
            room = MIN(k, MIN(rows, left - 1));
            if (room > 0) {
                st->drafts_asked++;
                TRY(h->propose(h->self, t1, pos - 1, room, hid, batch, &n));
                n = n < 0 ? 0 : MIN(n, room);
                st->proposed += n;
            }
            t1 = bonus;
            if (n == 0 || batch[0] != bonus) continue;  /* the step already rejected them */
            first = 1;
        } else {
            room = h ? MIN(k, MIN(rows - 1, left - 1)) : 0;
            if (room > 0) {
                st->drafts_asked++;
                TRY(h->propose(h->self, t1, pos, room, NULL, batch + 1, &n));
                n = n < 0 ? 0 : MIN(n, room);
                st->proposed += n;
            }
            if (n == 0) {  /* a plain step */
                TRY(b->step(b->self, t1, pos, logits));
                st->steps++;
                going = EMIT(t1);
                if (h) {
                    TRY(b->last_hidden(b->self, hid));
                    TRY(h->commit_rows(h->self, &t1, hid, 1));
                }
                pos++;
                if (going) t1 = argmax(logits, V);
                continue;
            }
            batch[0] = t1, n += 1;  /* t1 rides as row 0 */
        }
        for (int32_t i = 0; i < n; ++i)
            if (batch[i] < 0 || batch[i] >= V) { status = -4; goto done; }
        TRY(b->verify(b->self, batch, n, pos, logits));
        st->batches++, st->batch_rows += n;
        for (int32_t i = 0; i < n; ++i) choice[i] = argmax(logits + (size_t)i * V, V);
        /* batch[j] is right while it equals the base's choice after batch[j - 1] (one-pass:
           batch[0] is t1; two-pass: batch[0] is a draft the step already confirmed) */
        int32_t emit_n = 1;
        while (emit_n < n && batch[emit_n] == choice[emit_n - 1]) emit_n++;
        while (count < emit_n) { count++; if (!EMIT(batch[count - 1])) break; }
        TRY(b->commit_verify(b->self, count));
        if (h) {
            TRY(b->last_hidden_rows(b->self, hid, &got));
            if (got < count) { status = -3; goto done; }
            TRY(h->commit_rows(h->self, batch, hid, count));
        }
        st->accepted += first ? count : count - 1;
        pos += count;
        t1 = choice[count - 1];
    }
done:
    free(logits), free(hid), free(prompt_rows), free(batch), free(choice);
    return status;
}
