"""onebit's trained head written in the speculators EAGLE-3 layout (`onebit.heads.speculators`):
refused unless told to write it inexactly, and then written so that the round trip drafts
exactly the head's tokens, with d2t as offsets, norm_before_residual written out, the keys and
tensors vLLM's and llama.cpp's loaders read, and the layer an engine runs equal to onebit's
block where the stated difference (attention) does not apply. Damaged or hostile files are
refused by name before anything is allocated from their sizes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import onebit
from onebit.heads.eagle import EagleHead, fabricate_eagle, load_eagle, load_head
from onebit.heads.errors import DraftFileError, DraftMismatchError
from onebit.heads.speculators import (
    CONFIG_FILE,
    DIFFERENCES,
    EXPORT_KEY,
    WEIGHTS_FILE,
    NotRepresentableError,
    export_eagle3,
    load_eagle3,
)

PROMPT = [5, 17, 42, 9, 77, 3]


@pytest.fixture(scope="module")
def deep_dir(tmp_path_factory):
    """A fabricated float Qwen3 of six layers: the tiny test models' two layers leave no room
    for three distinct aux layer ids below the last (`aux_ids`)."""
    from onebit.models import fabricate_model

    return fabricate_model(tmp_path_factory.mktemp("qwen3x6"), "qwen3", quantized=False,
                           num_hidden_layers=6)


@pytest.fixture
def qwen3(deep_dir):
    """A fresh six-layer Qwen3 (overrides the conftest's two-layer one)."""
    from onebit.models import load_model

    return load_model(deep_dir)


@pytest.fixture
def head_dir(tmp_path, qwen3):
    return fabricate_eagle(tmp_path / "eagle", qwen3, intermediate=64, draft_vocab=200, seed=3)


@pytest.fixture
def exported(tmp_path, qwen3, head_dir):
    export_eagle3(head_dir, tmp_path / "eagle3", verifier="fabricated/qwen3", base=qwen3,
                  inexact=True)
    return tmp_path / "eagle3"


def _prefilled(base, head):
    base.reset()
    head.reset()
    base.verify(PROMPT, 0)
    base.commit_verify(len(PROMPT))
    head.commit_rows(PROMPT, base.last_hidden_rows(), len(PROMPT))


def _config(path):
    return json.loads((path / CONFIG_FILE).read_text())


def _rewrite_tensor(path, name, change):
    tensors = load_file(str(path / WEIGHTS_FILE))
    tensors[name] = change(tensors[name])
    save_file(tensors, str(path / WEIGHTS_FILE))


def _rewrite_config(path, change):
    raw = _config(path)
    change(raw)
    (path / CONFIG_FILE).write_text(json.dumps(raw))


def test_X1_taps_engines_cannot_give_are_refused(tmp_path, target_dirs):
    """On the two-layer test model the head's middle tap is the last layer, whose output no
    llama target gives an EAGLE-3 head: export refuses, naming the taps and the ids."""
    from onebit.models import load_model

    base = load_model(target_dirs["qwen3"])
    made = fabricate_eagle(tmp_path / "h", base)
    with pytest.raises(NotRepresentableError, match=r"taps \[0, 1\] .* ids \[1, 2, 1\]"):
        export_eagle3(made, tmp_path / "out", verifier="v", base=base, inexact=True)
    assert not (tmp_path / "out").exists()


def test_X1_export_is_refused_naming_both_differences(tmp_path, qwen3, head_dir):
    """Without inexact=True, export raises NotRepresentableError naming the fused input and
    the attention, and writes nothing: no file an engine would run differently unsaid."""
    with pytest.raises(NotRepresentableError, match=r"fused input.*attention.*--inexact"):
        export_eagle3(head_dir, tmp_path / "out", verifier="v", base=qwen3)
    assert not (tmp_path / "out").exists()


def test_X2_round_trip_drafts_exactly_the_heads_tokens(qwen3, head_dir, exported):
    """The head read back from the export holds bit for bit the tensors it was written from,
    and drafts the same chain of four as the original after every token of the vocabulary
    (float products), and the same again on the quantised products."""
    original = load_head(head_dir, qwen3, k=4)
    back = load_eagle3(exported, qwen3, k=4)
    assert back.tensors.keys() == original.tensors.keys()
    for name, value in original.tensors.items():
        assert np.array_equal(back.tensors[name], value), name
    assert back.config == original.config
    config, tensors = load_eagle(head_dir)
    for quantise in (False, None):
        a = EagleHead(config, tensors, qwen3, k=4, quantise=quantise)
        b = load_eagle3(exported, qwen3, k=4, quantise=quantise)
        for head in (a, b):
            _prefilled(qwen3, head)
        for token in range(qwen3.vocab_size):
            assert b.propose(token, len(PROMPT), 4, None) == \
                a.propose(token, len(PROMPT), 4, None), token


def test_X2_round_trip_head_runs_greedys_text(qwen3, exported):
    """In the loop, the head read back from the export emits greedy's tokens (the loop checks
    every draft)."""
    reference = onebit.greedy(qwen3, PROMPT, max_tokens=24)
    result = onebit.run(qwen3, load_eagle3(exported, qwen3), PROMPT, max_tokens=24, k=3)
    assert result.tokens == reference.tokens


def test_X3_d2t_is_written_as_offsets(qwen3, head_dir, exported):
    """d2t holds offsets: j + d2t[j] (vLLM's compute_logits, llama.cpp's converter) gives the
    head's target ids; the draft vocabulary is not a prefix, so ids written in its place would
    differ. A file with the ids written as offsets is refused (their sums fall outside the
    vocabulary or out of order), naming d2t."""
    _, tensors = load_eagle(head_dir)
    stored = load_file(str(exported / WEIGHTS_FILE))["d2t"]
    ids = tensors["d2t"]
    assert stored.dtype == np.int64
    assert np.array_equal(np.arange(len(stored)) + stored, ids)
    assert not np.array_equal(stored, ids)
    t2d = load_file(str(exported / WEIGHTS_FILE))["t2d"]
    assert t2d.dtype == np.bool_ and t2d.sum() == len(ids) and t2d[ids].all()
    _rewrite_tensor(exported, "d2t", lambda _: ids.copy())
    with pytest.raises(DraftFileError, match="'d2t' holds offsets"):
        load_eagle3(exported, qwen3)


def test_X4_norm_before_residual_is_written_explicitly(exported):
    """config.json says norm_before_residual: true (vLLM assumes true when it is absent,
    speculators and llama.cpp false) and norm_before_fc: false; a file that says otherwise
    is refused, since onebit's layer cancels the normed residual only."""
    raw = _config(exported)
    assert raw["norm_before_residual"] is True and raw["norm_before_fc"] is False


@pytest.mark.parametrize("value", [False, None])
def test_X4_another_residual_is_refused(qwen3, exported, value):
    """A config.json whose norm_before_residual is false or absent is NotRepresentableError."""
    _rewrite_config(exported, lambda raw: raw.update(norm_before_residual=value)
                    if value is not None else raw.pop("norm_before_residual"))
    with pytest.raises(NotRepresentableError, match="norm_before_residual"):
        load_eagle3(exported, qwen3)


#: what vLLM's speculators config (SpeculatorsConfig.validate_speculators_config and
#: update_eagle3) and llama.cpp's converter (conversion/llama.py: EAGLE-3 detection, target
#: layers, target_hidden_size) and eagle3 loader (src/models/eagle3.cpp) read
VLLM_PATHS = (("speculators_model_type",), ("transformer_layer_config",),
              ("speculators_config", "proposal_methods", 0, "speculative_tokens"),
              ("speculators_config", "verifier", "name_or_path"), ("draft_vocab_size",))
LAYER_KEYS = ("model_type", "vocab_size", "hidden_size", "intermediate_size",
              "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "rms_norm_eps", "rope_theta", "hidden_act")


def test_X5_config_and_tensors_are_what_the_engines_loaders_read(qwen3, exported):
    """Every key vLLM's speculators loader and llama.cpp's converter read is there with the
    type they use; llama.cpp detects EAGLE-3 (draft_vocab_size, one layer); the three aux
    layer ids are target layers; and the tensors are the names and shapes the eagle3 loaders
    create (q/k/v over 2 x hidden, fc over 3 x target hidden, lm_head of the draft vocabulary),
    with no embed_tokens (both engines then embed with the target's)."""
    raw = _config(exported)
    for path in VLLM_PATHS:
        node = raw
        for key in path:
            node = node[key]
        assert node is not None, path
    assert raw["speculators_model_type"] == "eagle3"
    assert raw["speculators_config"]["verifier"]["name_or_path"] == "fabricated/qwen3"
    layer = raw["transformer_layer_config"]
    assert all(key in layer for key in LAYER_KEYS)
    assert layer["model_type"] == "llama" and layer["num_hidden_layers"] == 1
    assert layer["num_attention_heads"] * layer["head_dim"] == 2 * qwen3.hidden_size
    ids = raw["eagle_aux_hidden_state_layer_ids"]
    assert len(ids) == 3 and all(0 <= i < qwen3.layer_count for i in ids)
    assert raw["target_hidden_size"] == qwen3.hidden_size
    assert raw[EXPORT_KEY]["exact"] is False
    assert raw[EXPORT_KEY]["differences"] == list(DIFFERENCES)
    h, d = qwen3.hidden_size, raw["draft_vocab_size"]
    qkv = layer["num_attention_heads"] * layer["head_dim"]
    want = {"fc.weight": (h, 3 * h), "norm.weight": (h,), "lm_head.weight": (d, h),
            "d2t": (d,), "t2d": (qwen3.vocab_size,),
            "layers.0.input_layernorm.weight": (h,), "layers.0.hidden_norm.weight": (h,),
            "layers.0.post_attention_layernorm.weight": (h,),
            "layers.0.self_attn.q_proj.weight": (qkv, 2 * h),
            "layers.0.self_attn.k_proj.weight": (qkv, 2 * h),
            "layers.0.self_attn.v_proj.weight": (qkv, 2 * h),
            "layers.0.self_attn.o_proj.weight": (h, qkv),
            "layers.0.mlp.gate_proj.weight": (layer["intermediate_size"], h),
            "layers.0.mlp.up_proj.weight": (layer["intermediate_size"], h),
            "layers.0.mlp.down_proj.weight": (h, layer["intermediate_size"])}
    stored = load_file(str(exported / WEIGHTS_FILE))
    assert {n: v.shape for n, v in stored.items()} == want


def _rms(x, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def eagle3_step(stored, raw, embed, hidden):
    """One position of the EAGLE-3 layer as vLLM's llama_eagle3.py and llama.cpp's eagle3
    graph compute it, written apart from onebit, in float64, for a position whose attention
    sees only itself (softmax over one key is 1: the output is its v): input_layernorm on the
    embedding, hidden_norm on the hidden, q/k/v over [embed; hidden], the residual the normed
    hidden (norm_before_residual), post-attention norm, SwiGLU, residual; then the final norm,
    lm_head and d2t offsets. Returns (target id of the argmax, the pre-norm output)."""
    t = {n: np.asarray(v, np.float64) for n, v in stored.items()}
    eps = raw["transformer_layer_config"]["rms_norm_eps"]
    p = "layers.0."
    e = _rms(embed, eps) * t[p + "input_layernorm.weight"]
    g = _rms(hidden, eps) * t[p + "hidden_norm.weight"]
    v = t[p + "self_attn.v_proj.weight"] @ np.concatenate([e, g])
    h = g + t[p + "self_attn.o_proj.weight"] @ v
    x = _rms(h, eps) * t[p + "post_attention_layernorm.weight"]
    gate, up = t[p + "mlp.gate_proj.weight"] @ x, t[p + "mlp.up_proj.weight"] @ x
    out = h + t[p + "mlp.down_proj.weight"] @ (gate / (1 + np.exp(-gate)) * up)
    logits = t["lm_head.weight"] @ (_rms(out, eps) * t["norm.weight"])
    j = int(np.argmax(logits))
    return j + int(stored["d2t"][j]), out


def test_X6_the_engines_layer_at_one_position_is_onebits_block(qwen3, head_dir, exported):
    """Fed the fused row onebit's head computes, the EAGLE-3 layer of the exported file (as
    the engines compute it, at a position that sees only itself) drafts onebit's first draft
    after every token, and hands the next step onebit's chained state: the file differs from
    onebit's head only in what DIFFERENCES states."""
    config, tensors = load_eagle(head_dir)
    stored = load_file(str(exported / WEIGHTS_FILE))
    raw = _config(exported)
    head = EagleHead(config, tensors, qwen3, quantise=False)
    _prefilled(qwen3, head)
    eps = config.rms_norm_eps
    low, mid = np.asarray(qwen3.tapped_rows()[-1], np.float64)
    high = np.asarray(qwen3.last_hidden(), np.float64)
    fused = np.asarray(stored["fc.weight"], np.float64) @ np.concatenate(
        [_rms(low, eps), _rms(mid, eps), high])
    for token in range(qwen3.vocab_size):
        first, state = eagle3_step(stored, raw, np.asarray(qwen3.embed_row(token), np.float64),
                                   fused)
        drafts = head.propose(token, len(PROMPT), 2, None)
        assert first == drafts[0], token
        second, _ = eagle3_step(stored, raw, np.asarray(qwen3.embed_row(first), np.float64),
                                state)
        assert second == drafts[1], token


def test_X7_a_huge_claimed_size_is_refused_before_allocating(qwen3, exported):
    """A config whose sizes are absurd (a hidden size of 10**9) is refused by field before
    anything is read; a header whose tensor claims a shape the config does not say is refused
    by tensor from the header alone."""
    _rewrite_config(exported, lambda raw: raw["transformer_layer_config"].update(
        hidden_size=10**9))
    with pytest.raises(DraftFileError, match="'hidden_size' is 1000000000"):
        load_eagle3(exported, qwen3)


def test_X7_a_header_that_lies_is_refused_from_the_header(tmp_path, qwen3, exported):
    """A safetensors header claiming fc is 65536 x 65536 (16 GiB), or a file cut short, is a
    DraftFileError naming the tensor or the sizes, read from the header alone."""
    file = exported / WEIGHTS_FILE
    data = file.read_bytes()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8: 8 + n])
    header["fc.weight"]["shape"] = [65536, 65536]
    text = json.dumps(header).encode()
    file.write_bytes(len(text).to_bytes(8, "little") + text + data[8 + n:])
    with pytest.raises(DraftFileError, match=r"'fc.weight' is F32 \[65536, 65536\]"):
        load_eagle3(exported, qwen3)
    file.write_bytes(data[:-100])
    with pytest.raises(DraftFileError, match="bytes; the header's tensors need"):
        load_eagle3(exported, qwen3)


@pytest.mark.parametrize(("name", "change", "error", "message"), [
    ("layers.0.self_attn.q_proj.weight", lambda w: w + 0.01, NotRepresentableError,
     "q_proj.weight' is not zero"),
    ("layers.0.self_attn.o_proj.weight", lambda w: w * 2, NotRepresentableError,
     r"o_proj.weight' is not \[I \| -I\]"),
    ("layers.0.hidden_norm.weight", lambda w: w * 1.5, NotRepresentableError,
     "hidden_norm.weight' is not all ones"),
    ("lm_head.weight", lambda w: w + 1, NotRepresentableError, "the base's own lm_head rows"),
    ("t2d", lambda m: ~m, DraftFileError, "'t2d' is not the mask"),
    ("d2t", lambda d: d + 10**6, DraftFileError, "offset 1000"),
    ("norm.weight", lambda w: w * np.nan, DraftFileError, "non-finite"),
])
def test_X7_a_file_onebits_head_cannot_run_is_refused_by_tensor(qwen3, exported, name, change,
                                                                error, message):
    """A tensor that is not what onebit writes (attention that attends, other norms, an
    lm_head of its own) makes a head onebit's head cannot compute (NotRepresentableError);
    broken maps or values are a DraftFileError; each names the tensor."""
    _rewrite_tensor(exported, name, change)
    with pytest.raises(error, match=message):
        load_eagle3(exported, qwen3)


def test_X7_an_eagle3_head_from_elsewhere_is_refused(qwen3, exported):
    """Without the onebit_export block (an EAGLE-3 head trained elsewhere), loading is
    NotRepresentableError: onebit's head cannot run a head with attention and raw taps."""
    _rewrite_config(exported, lambda raw: raw.pop(EXPORT_KEY))
    with pytest.raises(NotRepresentableError, match="not a head onebit exported"):
        load_eagle3(exported, qwen3)


def test_X7_a_head_for_another_base_is_refused(tmp_path, target_dirs, exported):
    """Loaded for a base of other sizes, the export is a DraftMismatchError naming them."""
    from onebit.models import load_model

    other = load_model(target_dirs["qwen3_5"])
    with pytest.raises((DraftMismatchError, DraftFileError)):
        load_eagle3(exported, other)


@pytest.mark.slow
def test_X8_smollm2s_shipped_head_round_trips(tmp_path):
    """The head shipped for SmolLM2, exported (inexactly) and read back, drafts on SmolLM2
    exactly the chains the shipped head drafts, on the compiled chain, after each position of
    a prompt; and config.json names SmolLM2's taps + 1 as aux layer ids."""
    from onebit.heads import shipped
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    path = skip_unless_cached("smollm2")
    model = load_text_model(path, kernel="int8")
    entry = next(e for e in shipped.SHIPPED if e.base_file == path.name)
    original = load_head(entry.verified(), model, base_path=path, k=4)
    export_eagle3(original, tmp_path / "x", verifier="HuggingFaceTB/SmolLM2-135M-Instruct",
                  base_path=path, inexact=True)
    back = load_eagle3(tmp_path / "x", model, base_path=path, k=4)
    assert _config(tmp_path / "x")["eagle_aux_hidden_state_layer_ids"] == [
        original.config.taps[0] + 1, original.config.taps[1] + 1, model.layer_count - 1]
    ids = model.tokenizer.encode("Write a short note to a friend about the weekend.")
    model.reset()
    for head in (original, back):
        head.reset()
    for pos, token in enumerate(ids[:-1]):
        model.verify([token], pos)
        model.commit_verify(1)
        for head in (original, back):
            head.commit_rows([token], model.last_hidden_rows(), 1)
        assert back.propose(ids[pos + 1], pos + 1, 4, None) == \
            original.propose(ids[pos + 1], pos + 1, 4, None), pos


@pytest.mark.slow
def test_X9_the_command_refuses_then_writes_with_inexact(tmp_path, capsys):
    """`onebit export-head` on SmolLM2 without --inexact exits 2 with the differences on one
    line and writes nothing; with --inexact and --fabricate 7 it writes a seeded random head
    of the shipped head's shapes, prints each difference as a warning, and the file reads back
    for SmolLM2."""
    from onebit.cli import main
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    path = skip_unless_cached("smollm2")
    out = tmp_path / "x"
    assert main(["export-head", "--model", str(path), "--out", str(out)]) == 2
    assert "not exactly representable" in capsys.readouterr().err and not out.exists()
    assert main(["export-head", "--model", str(path), "--fabricate", "7", "--inexact",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert captured.err.count("warning: not exact") == len(DIFFERENCES)
    raw = _config(out)
    assert raw["speculators_config"]["verifier"]["name_or_path"] == str(path)
    head = load_eagle3(out, load_text_model(path, kernel="int8"), base_path=path)
    assert head.config.draft_vocab_size == raw["draft_vocab_size"]
