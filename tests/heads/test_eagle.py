"""The trained head (`onebit.heads.eagle`): its files are checked like every file onebit reads,
it is refused by a base it was not made for, its drafts are the math its docstring states, and
under the loop the text is greedy's and the sampled distribution the target's.

Check ids (mutants/eagle/ names them): E1 the draft math (d2t, taps, the chain), E2 files and
pairing refused by name, E3 the loop's text with the head (greedy and under the policy)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import onebit
from onebit.heads.eagle import (
    CONFIG_FILE,
    WEIGHTS_FILE,
    EagleHead,
    config_from_json,
    fabricate_eagle,
    load_eagle,
    load_head,
    save_eagle,
)
from onebit.heads.errors import DraftError, DraftFileError, DraftMismatchError
from onebit.heads.policy import PolicyHead

PROMPT = [5, 17, 42, 9, 77, 3]
N = 32


def _rms(x, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def reference_drafts(config, tensors, target, token, k):
    """The docstring's math in float64, written apart from the head: the drafts after the
    target's last committed position."""
    t = {n: np.asarray(v, np.float64) for n, v in tensors.items()}
    eps = config.rms_norm_eps
    low, mid = np.asarray(target.tapped_rows()[-1], np.float64)
    high = np.asarray(target.last_hidden(), np.float64)
    u = t["fuse.weight"] @ np.concatenate([_rms(low, eps), _rms(mid, eps), high])
    d2t = tensors["d2t"]
    lm = np.asarray(target.weights.get(target.weights.lm_head_name()), np.float64)[d2t]
    out, x = [], token
    for _ in range(k):
        e = np.asarray(target.embed_row(x), np.float64)
        z = t["into.weight"] @ np.concatenate([_rms(u, eps), _rms(e, eps)])
        h = _rms(z, eps)
        gate, up = t["gate.weight"] @ h, t["up.weight"] @ h
        g = z + t["down.weight"] @ (gate / (1 + np.exp(-gate)) * up)
        logits = lm @ (_rms(g, eps) * t["out_norm"])
        x = int(d2t[int(np.argmax(logits))])
        out.append(x)
        u = g
    return out


@pytest.fixture
def head_dir(tmp_path, target):
    return fabricate_eagle(tmp_path / "eagle", target, intermediate=64, draft_vocab=200, seed=3)


def test_E1_drafts_are_the_stated_math(target, head_dir):
    """With float products (no quantisation), the head's drafts after a prefill equal the
    module docstring's math computed apart in float64: the fused taps, the chain on the head's
    own state, the base's lm_head rows of the draft vocabulary mapped back by d2t."""
    config, tensors = load_eagle(head_dir)
    head = EagleHead(config, tensors, target, quantise=False)
    target.reset()
    head.reset()
    target.verify(PROMPT, 0)
    target.commit_verify(len(PROMPT))
    head.commit_rows(PROMPT, target.last_hidden_rows(), len(PROMPT))
    t1 = int(np.argmax(target.lm_head_logits(target.last_hidden())))
    got = head.propose(t1, len(PROMPT), 4, None)
    assert got == reference_drafts(config, tensors, target, t1, 4)
    assert all(int(d) in set(tensors["d2t"].tolist()) for d in got)


def test_E1_quantised_products_draft_nearly_the_float_drafts(target, head_dir):
    """The q8_0 products (the base's integer kernel) give the float drafts' first token on a
    fabricated target: the quantisation error is far below the gaps between logits."""
    pytest.importorskip("numba")
    config, tensors = load_eagle(head_dir)
    exact = EagleHead(config, tensors, target, quantise=False)
    quick = EagleHead(config, tensors, target, quantise=True)
    target.reset()
    for head in (exact, quick):
        head.reset()
    target.verify(PROMPT, 0)
    target.commit_verify(len(PROMPT))
    for head in (exact, quick):
        head.commit_rows(PROMPT, target.last_hidden_rows(), len(PROMPT))
    t1 = 11
    assert quick.propose(t1, len(PROMPT), 1, None) == exact.propose(t1, len(PROMPT), 1, None)


@pytest.mark.parametrize("k", [1, 3])
def test_E3_text_and_state_are_greedy(target, head_dir, k):
    """run() with the trained head, and with it under the cost policy, emits greedy's tokens
    and leaves the target where greedy leaves it (one more step gives greedy's logits)."""
    config, tensors = load_eagle(head_dir)
    reference = onebit.greedy(target, PROMPT, max_tokens=N)
    after = target.step(int(np.argmax(target.lm_head_logits(target.last_hidden()))),
                        len(PROMPT) + N)
    for head in (EagleHead(config, tensors, target),
                 PolicyHead(EagleHead(config, tensors, target), max_k=4)):
        result = onebit.run(target, head, PROMPT, max_tokens=N, k=k)
        assert result.tokens == reference.tokens
        assert target.committed_length == len(PROMPT) + N
        nxt = int(np.argmax(target.lm_head_logits(target.last_hidden())))
        assert np.array_equal(target.step(nxt, len(PROMPT) + N), after)


def test_E3_sampled_drafts_carry_their_q_rows(target, head_dir):
    """Sampled, the head returns `Drafts` whose q rows are distributions over the base's
    vocabulary with no mass outside the draft vocabulary, and the run stays seed-stable."""
    config, tensors = load_eagle(head_dir)
    head = EagleHead(config, tensors, target)
    sampling = onebit.Sampling(temperature=0.8)
    a = onebit.run(target, head, PROMPT, max_tokens=N, k=3, sampling=sampling, seed=7)
    b = onebit.run(target, head, PROMPT, max_tokens=N, k=3, sampling=sampling, seed=7)
    assert a.tokens == b.tokens
    target.reset()
    head.reset()
    head.use_sampling(sampling, onebit.sampling.make_rng(None, 1))
    target.verify(PROMPT, 0)
    target.commit_verify(len(PROMPT))
    head.commit_rows(PROMPT, target.last_hidden_rows(), len(PROMPT))
    drafts = head.propose(4, len(PROMPT), 3, None)
    assert isinstance(drafts, onebit.Drafts)
    q = np.asarray(drafts.q)
    assert q.shape == (3, target.vocab_size)
    assert np.allclose(q.sum(axis=1), 1.0)
    outside = np.setdiff1d(np.arange(target.vocab_size), tensors["d2t"])
    assert q[:, outside].max() == 0.0
    assert all(q[i, t] > 0 for i, t in enumerate(drafts.tokens))


def test_E2_a_head_for_another_base_is_refused_by_name(tmp_path, target):
    """A head whose config names another sha256 is refused when the base's file is known,
    and one of other sizes always, each with a DraftMismatchError naming both."""
    fake = tmp_path / "base.gguf"
    fake.write_bytes(b"not the base")
    path = fabricate_eagle(tmp_path / "h", target)
    with pytest.raises(DraftMismatchError, match="trained for fabricated .* base is base.gguf"):
        load_head(path, target, base_path=fake)
    raw = json.loads((path / CONFIG_FILE).read_text())
    raw["vocab_size"] += 1
    raw["draft_vocab_size"] = 10
    config = config_from_json(raw, "x")
    _, tensors = load_eagle(path)
    tensors["d2t"] = tensors["d2t"][:10]
    with pytest.raises(DraftMismatchError, match="vocabulary"):
        EagleHead(config, tensors, target)


def _rewrite(path, **changes):
    raw = json.loads((path / CONFIG_FILE).read_text())
    raw.update(changes)
    (path / CONFIG_FILE).write_text(json.dumps(raw))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("kind", "dflash", "'kind'"),
    ("version", 2, "'version'"),
    ("hidden_size", 10**9, "'hidden_size'"),
    ("hidden_size", True, "'hidden_size'"),
    ("draft_vocab_size", 0, "'draft_vocab_size'"),
    ("taps", [0, 99], "'taps'"),
    ("taps", "0,1", "'taps'"),
    ("rms_norm_eps", -1, "'rms_norm_eps'"),
    ("base_sha256", "abc", "'base_sha256'"),
    ("max_chain", 1000, "'max_chain'"),
])
def test_E2_a_bad_config_is_refused_by_field(tmp_path, target, field, value, message):
    """Each bad config field gets a DraftFileError naming it, before any tensor is read."""
    path = fabricate_eagle(tmp_path / "h", target)
    _rewrite(path, **{field: value})
    with pytest.raises(DraftFileError, match=message):
        load_eagle(path)


def test_E2_damaged_weights_are_refused(tmp_path, target):
    """A truncated or garbled safetensors file, a missing or misshapen tensor, non-finite
    weights and a d2t out of order or out of range: each a DraftFileError naming it."""
    path = fabricate_eagle(tmp_path / "h", target, draft_vocab=50)
    config, tensors = load_eagle(path)
    weights = path / WEIGHTS_FILE
    blob = weights.read_bytes()
    weights.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(DraftFileError, match="bytes; the config's sizes need"):
        load_eagle(path)
    weights.write_bytes(b"\xff" * len(blob))
    with pytest.raises(DraftFileError, match="not a readable safetensors"):
        load_eagle(path)
    cases = {
        "nan": ("fuse.weight", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 0,
                                                  np.nan, a).astype(np.float32),
                "non-finite"),
        "order": ("d2t", lambda a: a[::-1].copy(), "increasing order"),
        "range": ("d2t", lambda a: a + 10**6, "increasing order"),
    }
    for _, (name, change, message) in cases.items():
        bad = dict(tensors)
        bad[name] = change(tensors[name])
        save_eagle(path, config, bad)
        with pytest.raises(DraftFileError, match=message):
            load_eagle(path)
    from safetensors.numpy import save_file

    renamed = {("up.weights" if k == "up.weight" else k): v for k, v in tensors.items()}
    save_file(renamed, str(weights))
    with pytest.raises(DraftFileError, match="up.weight"):
        load_eagle(path)
    save_file(dict(tensors, extra=np.zeros(3, np.float32)), str(weights))
    with pytest.raises(DraftFileError, match="extra"):
        load_eagle(path)


def test_E2_a_huge_claimed_size_is_refused_before_allocating(tmp_path, target):
    """A config whose sizes claim gigabytes is refused from the file's size alone."""
    path = fabricate_eagle(tmp_path / "h", target)
    _rewrite(path, intermediate_size=60000, hidden_size=16000)
    with pytest.raises(DraftFileError, match="bytes; the config's sizes need"):
        load_eagle(path)


def test_E2_taps_changed_under_the_head_are_named(target, head_dir):
    """A base whose layer taps were changed after the head was built (another head, say)
    makes the head raise a DraftError saying so, not draft from the wrong layers."""
    from onebit.errors import PartError

    for taps in ([0], list(reversed(load_eagle(head_dir)[0].taps))):
        head = load_head(head_dir, target)
        target.set_layer_taps(taps)
        with pytest.raises(PartError, match="layer taps changed") as caught:
            onebit.run(target, head, PROMPT, max_tokens=4, k=2)
        assert isinstance(caught.value.__cause__, DraftError)


@pytest.fixture
def block_base(tmp_path):
    """A fabricated GGUF base whose matrices and tied lm_head are in int8-kernel blocks: the
    base a trained head drafts through the compiled chain on."""
    pytest.importorskip("numba")
    from onebit.gguf import load_gguf
    from onebit.gguf.fabricate import fabricate_gguf

    def make(matrix_type):
        path = tmp_path / f"base-{matrix_type}.gguf"
        fabricate_gguf(path, "llama", matrix_type=matrix_type, hidden=64, vocab=300, ffn=96)
        # the NumPy layers (fused=False): the chain reads the base's rows, whichever forward
        # made them, and a fresh kernel cache then compiles the chain here, not a stack too
        return load_gguf(path, kernel="int8", fused=False)
    return make


def _prefilled(base, heads):
    base.reset()
    base.verify(PROMPT, 0)
    base.commit_verify(len(PROMPT))
    for head in heads:
        head.reset()
        head.commit_rows(PROMPT, base.last_hidden_rows(), len(PROMPT))


def chain_reference(head, base, token, k):
    """The compiled chain's math step by step in NumPy, written apart from it: the head's q8_0
    products and the base's lm_head block rows through `int8_kernel.block_rows`, norms as the
    kernel rounds them (x * (1 / sqrt(sum / n + eps)), the sum in index order). Returns the
    drafts and the first draft's softmax probability."""
    from onebit.models import int8_kernel

    eps = np.float32(head.eps)

    def rms(x):
        total = np.float32(0)
        for v in np.asarray(x, np.float32):
            total = np.float32(total + v * v)
        return (x * (np.float32(1) / np.sqrt(total / np.float32(x.size) + eps))).astype(
            np.float32)

    def product(name, x):
        return int8_kernel.block_rows(head.products.blocks[name], x[None, :])[0]

    low, mid, high = head._rows
    lm = base.lm_head_subset_blocks(head.d2t)
    u = product("fuse", np.concatenate([rms(low), rms(mid), high]))
    drafts, first, x = [], None, token
    inter = head.intermediate
    for _ in range(k):
        e = np.asarray(base.embed_row(x), np.float32)
        z = product("into", np.concatenate([rms(u), rms(e)]))
        gu = product("gate_up", rms(z))
        act = (gu[:inter] / (np.float32(1) + np.exp(-gu[:inter])) * gu[inter:]).astype(
            np.float32)
        g = z + product("down", act)
        logits = int8_kernel.block_rows(lm, (rms(g) * head.w_out).astype(np.float32)[None])[0]
        top = int(np.argmax(logits))
        if first is None:
            first = float(1 / np.exp(logits - logits[top]).sum())
        x = int(head.d2t[top])
        drafts.append(x)
        u = g
    return drafts, first


# SmolLM2's lm_head is q8_0; each lm_head kind compiles a chain of its own, so the other kinds
# run in CI's slow step
@pytest.mark.parametrize("matrix_type", ["Q8_0", pytest.param("Q4_1", marks=pytest.mark.slow)])
def test_E1_the_compiled_chain_drafts_what_the_numpy_path_drafts(tmp_path, block_base,
                                                                  matrix_type):
    """On a base whose lm_head is in blocks, greedy drafts come from one compiled call
    (onebit.heads.eagle_kernel). From every token of the vocabulary its chain of 4 drafts is
    the stated math's, computed apart step by step (`chain_reference`), and its first
    draft's probability agrees to 1e-4 (the SiLU's exp is the only rounding that differs);
    the first draft is also the NumPy path's (whose norms round otherwise: along a chain of
    random weights that grows into a rare near-tie flipped, so only draft 1 is compared)."""
    base = block_base(matrix_type)
    made = fabricate_eagle(tmp_path / "eagle", base, intermediate=64, draft_vocab=120, seed=5)
    config, tensors = load_eagle(made)
    fast = EagleHead(config, tensors, base, compiled=True)
    slow = EagleHead(config, tensors, base, compiled=False)
    assert fast.chain is not None and slow.chain is None
    _prefilled(base, (fast, slow))
    for token in range(base.vocab_size):
        got = fast.propose(token, len(PROMPT), 4, None)
        drafts, first = chain_reference(fast, base, token, 4)
        assert got == drafts, f"from token {token}"
        assert abs(fast.confidence[0] - first) <= 1e-4, f"from token {token}"
        assert got[0] == slow.propose(token, len(PROMPT), 1, None)[0], f"from token {token}"


def test_E1_the_compiled_chain_stops_where_the_policy_says(tmp_path, block_base):
    """`stop_below` ends the compiled chain after the first draft less sure than it: its
    drafts are its own uncut chain's, cut there."""
    base = block_base("Q8_0")
    made = fabricate_eagle(tmp_path / "eagle", base, intermediate=64, draft_vocab=120, seed=5)
    config, tensors = load_eagle(made)
    head = EagleHead(config, tensors, base, compiled=True)
    _prefilled(base, (head,))
    cut = 0
    for token in range(0, base.vocab_size, 7):
        head.stop_below = 0.0
        full = head.propose(token, len(PROMPT), 4, None)
        sure = list(head.confidence)
        threshold = float(np.median(sure))
        head.stop_below = threshold
        got = head.propose(token, len(PROMPT), 4, None)
        expected = next((i + 1 for i, s in enumerate(sure) if s < threshold), len(full))
        assert got == full[:expected]
        assert len(head.confidence) == expected
        cut += expected < len(full)
    assert cut, "no chain was cut: the test proves nothing"


def test_E1_a_compiled_chain_is_refused_where_it_cannot_run(target, head_dir):
    """Asking for the compiled chain on a base whose lm_head is not in int8-kernel blocks (a
    float checkpoint) is refused at construction, not silently drafted another way; by
    default such a base drafts through the NumPy path."""
    config, tensors = load_eagle(head_dir)
    with pytest.raises(ValueError, match="compiled chain"):
        EagleHead(config, tensors, target, compiled=True)
    assert EagleHead(config, tensors, target).chain is None


@pytest.mark.parametrize("ids", [[], [-1], [0, 300], [[1, 2]], [0.5]])
def test_E2_lm_head_rows_of_bad_ids_are_refused(block_base, ids):
    """The lm_head rows a compiled head multiplies by are asked for by token id; ids that are
    not a non-empty list of integers inside the vocabulary get `ModelInputError` naming the
    call and the range, before anything is gathered."""
    from onebit.models.errors import ModelInputError

    base = block_base("Q8_0")
    with pytest.raises(ModelInputError, match=r"lm_head_subset_blocks needs .* \[0, 300\)"):
        base.lm_head_subset_blocks(ids)
