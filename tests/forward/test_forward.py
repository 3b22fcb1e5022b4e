"""The forward as a BaseModel: batch invariance, exact rollback, and the loop's contract."""

from __future__ import annotations

import numpy as np
import pytest
from matrix import cover

import onebit
from onebit.models import fabricate_model, load_model
from pytest_onebit.contract.assertions import assert_logits_match
from pytest_onebit.doubles.heads import Oracle, garbage_head, half_head, perfect_head

PROMPT = [1, 2, 3, 4]
N = 24


def step_all(model, tokens):
    """Reset and step `tokens` one by one; the logits after each."""
    model.reset()
    return [model.step(t, pos) for pos, t in enumerate(tokens)]


def test_is_a_base_model(q4_model):
    """The loaded model satisfies the BaseModel protocol and reports its sizes."""
    assert isinstance(q4_model, onebit.BaseModel)
    assert q4_model.vocab_size == 256
    assert q4_model.max_batch_rows() == 8
    assert q4_model.layer_count == q4_model.config.num_hidden_layers


@pytest.mark.parametrize("kernel, dtype", cover(["numba", "numpy"], ["float32", "float64"]))
def test_verify_rows_are_bit_identical_to_steps(model_dirs, kind, kernel, dtype):
    """Every row of an 8-row verify equals, bit for bit, the logits of stepping the same tokens
    one by one, and so do the hidden rows, for both kernels and both precisions."""
    model = load_model(model_dirs[kind, "q4nx"], kernel=kernel, dtype=dtype)
    tokens = PROMPT + [9, 200, 31, 7, 64, 5, 17, 250]
    stepped = step_all(model, tokens)
    hidden = []
    model.reset()
    for pos, t in enumerate(tokens):
        model.step(t, pos)
        hidden.append(model.last_hidden())
    model.reset()
    for pos, t in enumerate(PROMPT):
        model.step(t, pos)
    rows = model.verify(tokens[4:], 4)
    assert rows.dtype == np.dtype(dtype)
    for i in range(8):
        assert_logits_match(rows[i], stepped[4 + i], rel_l1=0.0)
    model.commit_verify(8)
    assert np.array_equal(model.last_hidden_rows(), np.stack(hidden[4:]))


def test_commit_verify_restores_state_exactly(q4_model):
    """For every n in 0..6, verify(6 rows) + commit_verify(n) leaves the KV cache length and the
    GDN conv / recurrent state exactly as stepping n tokens: the next step's logits and hidden
    are bit-identical to plain decode's at that position."""
    tokens = PROMPT + [11, 22, 33, 44, 55, 66]
    for n in range(7):
        reference = step_all(q4_model, tokens[: 4 + n] + [77])[-1]
        ref_hidden = q4_model.last_hidden()
        q4_model.reset()
        for pos, t in enumerate(PROMPT):
            q4_model.step(t, pos)
        q4_model.verify(tokens[4:], 4)
        q4_model.commit_verify(n)
        assert q4_model.committed_length == 4 + n
        assert_logits_match(q4_model.step(77, 4 + n), reference, rel_l1=0.0)
        assert np.array_equal(q4_model.last_hidden(), ref_hidden)


@pytest.mark.parametrize("k", [3, 7])
@pytest.mark.parametrize("flavour", ["one-pass", "two-pass"])
@pytest.mark.parametrize(
    "make_head", [perfect_head, garbage_head, half_head], ids=["perfect", "garbage", "half"]
)
def test_speculative_text_equals_greedy(model_dirs, kind, k, flavour, make_head):
    """With oracle heads (perfect, garbage, half-right) at k = 3 and 7, one- and two-pass,
    run() emits exactly greedy's 24 tokens on the real forward; then one more step gives
    logits bit-identical to greedy's at that position (the state after partial accepts,
    GDN layers included, is plain decode's)."""
    model = load_model(model_dirs[kind, "q4nx"])
    oracle = Oracle.from_greedy(model, PROMPT, N + 1)
    truth = list(oracle.tokens[:N])
    # greedy's logits one step past its 24 emitted tokens: the reference for the state check
    onebit.greedy(model, PROMPT, max_tokens=N)
    reference = model.step(oracle.tokens[N], len(PROMPT) + N)
    result = onebit.run(model, make_head(oracle, flavour), PROMPT, max_tokens=N, k=k)
    assert result.tokens == truth
    assert model.committed_length == len(PROMPT) + N
    assert_logits_match(model.step(oracle.tokens[N], len(PROMPT) + N), reference, rel_l1=0.0)


def test_half_head_makes_partial_accepts(q4_model):
    """The half-right head really exercises partial commits (some batches accept only part of
    their drafts), so the bit-identity above covers the rollback path."""
    oracle = Oracle.from_greedy(q4_model, PROMPT, N)
    result = onebit.run(q4_model, half_head(oracle), PROMPT, max_tokens=N, k=7)
    assert result.stats.batches > 0
    assert 0 < result.stats.accepted < result.stats.proposed


def test_perfect_one_pass_k7_pass_law(q4_model):
    """k = 7, perfect one-pass head, 24 tokens on an 8-row base: 3 batches and 0 steps."""
    oracle = Oracle.from_greedy(q4_model, PROMPT, N)
    result = onebit.run(q4_model, perfect_head(oracle), PROMPT, max_tokens=N, k=7)
    assert result.tokens == list(oracle.tokens)
    assert (result.stats.batches, result.stats.steps) == (3, 0)
    assert result.stats.passes_per_token == 0.125


@pytest.mark.parametrize("kernel, dtype", cover(["numba", "numpy"], [np.float32, np.float64]))
def test_kernels_are_row_invariant(kernel, dtype):
    """Each kernel gives every row of an 8-row product the bits it gives that row alone, for
    a weight small enough to run on one thread and one large enough to run in parallel."""
    from onebit.models import kernels

    _, linear = kernels.choose(kernel)
    rng = np.random.default_rng(4)
    for shape in [(96, 256), (1024, 1024)]:
        weight = rng.standard_normal(shape).astype(dtype)
        rows = rng.standard_normal((8, shape[1])).astype(dtype)
        batch = linear(weight, rows)
        for r in range(8):
            assert np.array_equal(batch[r], linear(weight, rows[r : r + 1])[0])
        assert np.allclose(batch, rows @ weight.T, rtol=1e-4, atol=1e-3)


def test_lm_head_and_embed_row(q4_model):
    """lm_head_logits(last_hidden()) reproduces the step's logits bit for bit (1-row and
    batched), and embed_row returns the embedding row the forward starts from."""
    logits = step_all(q4_model, PROMPT)[-1]
    hidden = q4_model.last_hidden()
    assert np.array_equal(q4_model.lm_head_logits(hidden), logits)
    assert np.array_equal(q4_model.lm_head_logits(np.stack([hidden] * 3))[2], logits)
    embed = q4_model.weights.get("model.embed_tokens.weight")
    assert np.array_equal(q4_model.embed_row(5), embed[5])


def test_layer_taps_follow_committed_tokens(q4_model):
    """set_layer_taps records, per committed token, the listed layers' outputs: after a
    speculative run they equal what stepping prompt + emitted records, one row per token."""
    taps = [q4_model.layer_count - 1, 0]
    oracle = Oracle.from_greedy(q4_model, PROMPT, N)
    q4_model.set_layer_taps(taps)
    onebit.run(q4_model, half_head(oracle), PROMPT, max_tokens=N, k=7)
    got = q4_model.tapped_rows()
    assert got.shape == (len(PROMPT) + N, 2, q4_model.hidden_size)
    q4_model.reset()
    q4_model.set_layer_taps(taps)
    for pos, t in enumerate(PROMPT + list(oracle.tokens)):
        q4_model.step(t, pos)
    assert np.array_equal(got, q4_model.tapped_rows())
    assert not np.array_equal(got[:, 0], got[:, 1])


def test_unpack_per_token_switch_gives_identical_output(model_dirs, kind, monkeypatch):
    """ONEBIT_UNPACK_PER_TOKEN=1 prepares the Q4NX weights' cached form (packed blocks on the
    numba kernel, float32 on numpy) on every token instead of once per weight a product reads,
    and the decoded tokens and logits are identical in both arms (A B A B)."""
    path = model_dirs[kind, "q4nx"]
    arms = []
    for per_token in ("0", "1", "0", "1"):
        monkeypatch.setenv("ONEBIT_UNPACK_PER_TOKEN", per_token)
        model = load_model(path, kernel="numba")  # the packed kernel's cache, by name
        assert model.weights.unpack_per_token == (per_token == "1")
        result = onebit.greedy(model, PROMPT, max_tokens=6)
        arms.append((result.tokens, model.step(1, len(PROMPT) + 6)))
        quantised = sum(model.weights.kind(n) == "q4nx" for n in model.weights.names())
        # an embedding that is not the lm_head is looked up a row at a time, never unpacked
        embed = "model.embed_tokens.weight"
        multiplied = quantised - (model.weights.kind(embed) == "q4nx"
                                  and model.weights.lm_head_name() != embed)
        if per_token == "1":
            assert model.weights.unpacks > 10 * quantised
        else:
            assert model.weights.unpacks == multiplied
    for tokens, logits in arms[1:]:
        assert tokens == arms[0][0]
        assert_logits_match(logits, arms[0][1], rel_l1=0.0)


def test_verify_across_kv_cache_growth(model_dirs):
    """A verify batch that runs past the KV cache's initial capacity (64 positions) still gives
    rows bit-identical to stepping, and the committed state continues exactly."""
    model = load_model(model_dirs["qwen3", "q4nx"])
    tokens = [(7 * i + 3) % 256 for i in range(70)]
    stepped = step_all(model, tokens)
    model.reset()
    for pos, t in enumerate(tokens[:60]):
        model.step(t, pos)
    rows = model.verify(tokens[60:68], 60)
    for i in range(8):
        assert_logits_match(rows[i], stepped[60 + i], rel_l1=0.0)
    model.commit_verify(8)
    assert_logits_match(model.step(tokens[68], 68), stepped[68], rel_l1=0.0)


def test_final_norm_is_the_forwards_own(tmp_path):
    """final_norm() applied to the last layer's output, then lm_head_logits(), gives exactly
    the logits a step returns: it is the norm the forward ends with; wrong shapes are named."""
    from onebit.models import ModelInputError

    model = load_model(fabricate_model(tmp_path / "m", "qwen3_5"))
    model.set_layer_taps([model.layer_count - 1])
    logits = model.step(7, 0)
    last_layer = model.tapped_rows()[-1]  # [taps, H]
    assert np.array_equal(model.lm_head_logits(model.final_norm(last_layer))[0], logits)
    with pytest.raises(ModelInputError, match="final_norm needs"):
        model.final_norm(np.zeros(256))
