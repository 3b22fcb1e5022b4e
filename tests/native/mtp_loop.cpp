// The NPU engine's speculative loop (`mtp::run`), ported to the onebit C ABI so that onebit's
// contract can hold it: batched prefill, the one-pass round (t1 rides in the verify batch as
// row 0) and the two-pass round (t1 stepped first so the head reads the hidden after it), as
// docs/contract.md describes them. mutants/c_loop/ holds believable bugs of this file.
//
// Every callback's status is checked; on a failure the loop returns a negative status with
// what it had emitted already in `out` (each token is handed on once the base committed it).
#include "onebit_abi.h"

#include <cmath>
#include <cstring>
#include <vector>

const int32_t onebit_abi_version = ONEBIT_ABI_VERSION;  // declared extern "C" in the header

namespace mtp {

enum Status : int32_t {
    kOk = 0,
    kBaseFailed = -1,    // a base callback returned non-zero
    kHeadFailed = -2,    // a head callback returned non-zero
    kBadBase = -3,       // the base answered something unusable (rows < 1, NaN logits)
    kBadHead = -4,       // the head answered something unusable (a draft outside the vocab)
    kBadArguments = -5,  // a negative budget or k, an empty prompt
};

#define MTP_TRY(call, status) \
    do {                      \
        if ((call) != 0) return (status); \
    } while (0)

static int32_t argmax(const float *row, int32_t vocab) {
    int32_t best = 0;  // the first maximum, as numpy's argmax
    for (int32_t i = 1; i < vocab; ++i)
        if (row[i] > row[best]) best = i;
    return best;
}

static bool finite_rows(const float *logits, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
        if (!std::isfinite(logits[i])) return false;
    return true;
}

class Loop {
  public:
    Loop(const onebit_base *base, const onebit_head *head, int32_t max_tokens, int32_t k,
         onebit_on_token on_token, void *ctx, int32_t *out, int32_t *n_out, int32_t *stopped,
         onebit_stats *stats)
        : base_(base), head_(head), max_tokens_(max_tokens), k_(k), on_token_(on_token),
          ctx_(ctx), out_(out), n_out_(n_out), stopped_(stopped), stats_(stats),
          vocab_(base->vocab_size), hidden_size_(base->hidden_size) {}

    int32_t run(const int32_t *prompt, int32_t prompt_len) {
        int32_t rows = 0;
        MTP_TRY(base_->max_batch_rows(base_->self, &rows), kBaseFailed);
        if (rows < 1) return kBadBase;
        max_rows_ = rows;
        int32_t width = rows;
        if (base_->max_prefill_rows != nullptr) {
            MTP_TRY(base_->max_prefill_rows(base_->self, &width), kBaseFailed);
            if (width < 1) return kBadBase;
        }
        int32_t widest = width > rows ? width : rows;
        logits_.resize(static_cast<size_t>(widest) * vocab_);
        rows_.resize(static_cast<size_t>(widest) * hidden_size_);
        hidden_.resize(hidden_size_);
        int32_t status = prefill(prompt, prompt_len, width);
        if (status != kOk) return status;
        bool two_pass = false;
        if (head_ != nullptr) {
            int32_t needs = 0;
            MTP_TRY(head_->needs_last_hidden(head_->self, &needs), kHeadFailed);
            two_pass = needs != 0;
        }
        while (*n_out_ < max_tokens_ && !*stopped_) {
            stats_->rounds += 1;
            if (head_ == nullptr) {
                status = plain_step();
            } else if (two_pass) {
                status = two_pass_round();
            } else {
                status = one_pass_round();
            }
            if (status != kOk) return status;
        }
        return kOk;
    }

  private:
    // The prompt through the batch path, `width` tokens a batch, each committed whole; the
    // head gets every prompt row in one commit_rows. t1 is the last batch's last choice.
    int32_t prefill(const int32_t *prompt, int32_t prompt_len, int32_t width) {
        MTP_TRY(base_->reset(base_->self), kBaseFailed);
        if (head_ != nullptr) MTP_TRY(head_->reset(head_->self), kHeadFailed);
        std::vector<float> prompt_rows;
        if (head_ != nullptr) prompt_rows.resize(static_cast<size_t>(prompt_len) * hidden_size_);
        for (int32_t at = 0; at < prompt_len; at += width) {
            int32_t n = prompt_len - at < width ? prompt_len - at : width;
            MTP_TRY(base_->verify(base_->self, prompt + at, n, at, logits_.data()), kBaseFailed);
            stats_->prefill_batches += 1;
            stats_->prefill_rows += n;
            if (!finite_rows(logits_.data(), static_cast<int64_t>(n) * vocab_)) {
                base_->commit_verify(base_->self, 0);
                return kBadBase;
            }
            MTP_TRY(base_->commit_verify(base_->self, n), kBaseFailed);
            if (head_ != nullptr) {
                int32_t got = 0;
                MTP_TRY(base_->last_hidden_rows(base_->self, rows_.data(), &got), kBaseFailed);
                if (got < n) return kBadBase;
                std::memcpy(prompt_rows.data() + static_cast<size_t>(at) * hidden_size_,
                            rows_.data(), sizeof(float) * n * hidden_size_);
            }
            t1_ = argmax(logits_.data() + static_cast<size_t>(n - 1) * vocab_, vocab_);
        }
        if (head_ != nullptr)
            MTP_TRY(head_->commit_rows(head_->self, prompt, prompt_rows.data(), prompt_len),
                    kHeadFailed);
        pos_ = prompt_len;
        return kOk;
    }

    // Hand one token on; false when the consumer asked to stop.
    bool emit(int32_t token) {
        out_[(*n_out_)++] = token;
        stats_->emitted += 1;
        if (on_token_ != nullptr && on_token_(ctx_, token) == 0) {
            *stopped_ = 1;
            return false;
        }
        return true;
    }

    int32_t budget_left() const { return max_tokens_ - *n_out_; }

    // Up to `room` drafts for the positions after t1, cut to the room and checked.
    int32_t propose(int32_t room, const float *hidden, int32_t at) {
        drafts_.resize(room);
        int32_t n = 0;
        stats_->drafts_asked += 1;
        MTP_TRY(head_->propose(head_->self, t1_, at, room, hidden, drafts_.data(), &n),
                kHeadFailed);
        if (n < 0) n = 0;
        if (n > room) n = room;
        for (int32_t i = 0; i < n; ++i)
            if (drafts_[i] < 0 || drafts_[i] >= vocab_) return kBadHead;
        drafts_.resize(n);
        stats_->proposed += n;
        return kOk;
    }

    // t1 through one step: the plain path (no head, or no drafts).
    int32_t plain_step() {
        MTP_TRY(base_->step(base_->self, t1_, pos_, logits_.data()), kBaseFailed);
        stats_->steps += 1;
        if (!finite_rows(logits_.data(), vocab_)) return kBadBase;
        pos_ += 1;
        bool going = emit(t1_);
        if (head_ != nullptr) {
            MTP_TRY(base_->last_hidden(base_->self, hidden_.data()), kBaseFailed);
            MTP_TRY(head_->commit_rows(head_->self, &t1_, hidden_.data(), 1), kHeadFailed);
        }
        if (going) t1_ = argmax(logits_.data(), vocab_);
        return kOk;
    }

    // One provisional batch at pos; choices_[i] is the base's choice after row i.
    int32_t verify(const int32_t *tokens, int32_t n, int32_t at) {
        MTP_TRY(base_->verify(base_->self, tokens, n, at, logits_.data()), kBaseFailed);
        stats_->batches += 1;
        stats_->batch_rows += n;
        if (!finite_rows(logits_.data(), static_cast<int64_t>(n) * vocab_)) {
            base_->commit_verify(base_->self, 0);
            return kBadBase;
        }
        choices_.resize(n);
        for (int32_t i = 0; i < n; ++i)
            choices_[i] = argmax(logits_.data() + static_cast<size_t>(i) * vocab_, vocab_);
        return kOk;
    }

    // Emit tokens[0..take) until the consumer stops; returns how many were emitted.
    int32_t emit_some(const int32_t *tokens, int32_t take) {
        int32_t n = 0;
        while (n < take) {
            n += 1;
            if (!emit(tokens[n - 1])) break;
        }
        return n;
    }

    // Tell the head that tokens[0..count) are committed, with the rows of the last verify
    // from row `first` on.
    int32_t tell_head(const int32_t *tokens, int32_t first, int32_t count) {
        if (head_ == nullptr) return kOk;
        int32_t got = 0;
        MTP_TRY(base_->last_hidden_rows(base_->self, rows_.data(), &got), kBaseFailed);
        if (got < first + count) return kBadBase;
        MTP_TRY(head_->commit_rows(head_->self, tokens,
                                   rows_.data() + static_cast<size_t>(first) * hidden_size_,
                                   count),
                kHeadFailed);
        return kOk;
    }

    int32_t one_pass_round() {
        int32_t room = k_;
        if (max_rows_ - 1 < room) room = max_rows_ - 1;  // t1 takes a row of the batch
        if (budget_left() - 1 < room) room = budget_left() - 1;  // and a token of the budget
        drafts_.clear();
        if (room > 0) {
            int32_t status = propose(room, nullptr, pos_);
            if (status != kOk) return status;
        }
        if (drafts_.empty()) return plain_step();
        batch_.assign(1, t1_);
        batch_.insert(batch_.end(), drafts_.begin(), drafts_.end());
        int32_t status = verify(batch_.data(), static_cast<int32_t>(batch_.size()), pos_);
        if (status != kOk) return status;
        int32_t take = 0;
        while (take < static_cast<int32_t>(drafts_.size()) && drafts_[take] == choices_[take])
            take += 1;
        // Emit t1 and the accepted drafts; commit exactly the emitted ones.
        int32_t count = emit_some(batch_.data(), take + 1);
        MTP_TRY(base_->commit_verify(base_->self, count), kBaseFailed);
        pos_ += count;
        status = tell_head(batch_.data(), 0, count);
        if (status != kOk) return status;
        stats_->accepted += count - 1;
        t1_ = choices_[count - 1];  // the bonus token: the base's choice after the last emitted
        return kOk;
    }

    int32_t two_pass_round() {
        int32_t at = pos_;
        MTP_TRY(base_->step(base_->self, t1_, pos_, logits_.data()), kBaseFailed);
        stats_->steps += 1;
        if (!finite_rows(logits_.data(), vocab_)) return kBadBase;
        pos_ += 1;
        bool going = emit(t1_);
        MTP_TRY(base_->last_hidden(base_->self, hidden_.data()), kBaseFailed);
        MTP_TRY(head_->commit_rows(head_->self, &t1_, hidden_.data(), 1), kHeadFailed);
        if (!going) return kOk;
        int32_t b = argmax(logits_.data(), vocab_);
        int32_t room = k_;
        if (max_rows_ < room) room = max_rows_;
        if (budget_left() < room) room = budget_left();
        drafts_.clear();
        if (room > 0) {
            int32_t status = propose(room, hidden_.data(), at);
            if (status != kOk) return status;
        }
        if (drafts_.empty() || drafts_[0] != b) {  // the step already rejected them
            t1_ = b;
            return kOk;
        }
        int32_t n = static_cast<int32_t>(drafts_.size());
        int32_t status = verify(drafts_.data(), n, pos_);
        if (status != kOk) return status;
        int32_t take = 1;
        while (take < n && drafts_[take] == choices_[take - 1]) take += 1;
        int32_t count = emit_some(drafts_.data(), take);
        MTP_TRY(base_->commit_verify(base_->self, count), kBaseFailed);
        pos_ += count;
        status = tell_head(drafts_.data(), 0, count);
        if (status != kOk) return status;
        stats_->accepted += count;
        t1_ = choices_[count - 1];
        return kOk;
    }

    const onebit_base *base_;
    const onebit_head *head_;
    int32_t max_tokens_, k_;
    onebit_on_token on_token_;
    void *ctx_;
    int32_t *out_, *n_out_, *stopped_;
    onebit_stats *stats_;
    int32_t vocab_, hidden_size_;
    int32_t max_rows_ = 1;
    int32_t t1_ = 0, pos_ = 0;
    std::vector<float> logits_, rows_, hidden_;
    std::vector<int32_t> drafts_, choices_, batch_;
};

int32_t run(const onebit_base *base, const onebit_head *head, const int32_t *prompt,
            int32_t prompt_len, int32_t max_tokens, int32_t k, onebit_on_token on_token,
            void *ctx, int32_t *out, int32_t *n_out, int32_t *stopped, onebit_stats *stats) {
    *n_out = 0;
    *stopped = 0;
    onebit_stats local{};
    onebit_stats *counted = stats != nullptr ? stats : &local;
    std::memset(counted, 0, sizeof(*counted));
    if (base == nullptr || prompt == nullptr || prompt_len < 1 || max_tokens < 0 || k < 0)
        return kBadArguments;
    for (int32_t i = 0; i < prompt_len; ++i)
        if (prompt[i] < 0 || prompt[i] >= base->vocab_size) return kBadArguments;
    Loop loop(base, head, max_tokens, k, on_token, ctx, out, n_out, stopped, counted);
    return loop.run(prompt, prompt_len);
}

}  // namespace mtp

extern "C" __attribute__((visibility("default"))) int32_t onebit_run(
    const onebit_base *base, const onebit_head *head, const int32_t *prompt, int32_t prompt_len,
    int32_t max_tokens, int32_t k, onebit_on_token on_token, void *ctx, int32_t *out,
    int32_t *n_out, int32_t *stopped, onebit_stats *stats) {
    try {
        return mtp::run(base, head, prompt, prompt_len, max_tokens, k, on_token, ctx, out, n_out,
                        stopped, stats);
    } catch (...) {  // never unwind into the caller (std::bad_alloc from a vector)
        return mtp::kBadArguments;
    }
}
