"""Qwen3.5's own MTP head: the published checkpoint layout `fabricate qwen3_5 --mtp` writes,
what `load_mtp` reads of it (only `mtp.*`, only from the shards holding them), layer `j % n`
per chained step, its refusals, exact text through the two-pass round, and `onebit
acceptance --head mtp` without a draft."""

from __future__ import annotations

import argparse
import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import onebit
import onebit.heads.mtp as mtp_module
from onebit.commands import acceptance, fabricate
from onebit.heads import DraftFileError, add_own_mtp, load_mtp, load_own_mtp
from onebit.heads import checkpoint as checkpoint_module
from onebit.models import fabricate_model, load_model
from onebit.models import weights as weights_module
from onebit.tools.acceptance import score


def cli(module, *argv):
    parser = argparse.ArgumentParser(prog="onebit")
    sub = parser.add_subparsers(dest="command", required=True)
    module.add_parser(sub).set_defaults(_main=module.main)
    args = parser.parse_args([str(a) for a in argv])
    return args._main(args)


def header(file):
    with open(file, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(size))


@pytest.fixture(scope="module")
def own_dir(tmp_path_factory):
    """`onebit fabricate qwen3_5 DIR --mtp 2`."""
    path = tmp_path_factory.mktemp("own") / "m"
    assert cli(fabricate, "fabricate", "qwen3_5", path, "--mtp", 2) == 0
    return path


def test_fabricate_writes_the_published_layout(own_dir):
    """The config wraps the text model's fields, MTP depth included, under text_config of a
    Qwen3_5ForConditionalGeneration; the tensors are BF16 over two shards and an index, named
    model.language_model.*, lm_head.weight and mtp.* (fc, the two pre-fc norms, norm, and
    per layer a gated q_proj twice as wide as o_proj's input)."""
    raw = json.loads((own_dir / "config.json").read_text())
    assert raw["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert raw["model_type"] == "qwen3_5"
    text = raw["text_config"]
    assert (text["model_type"], text["mtp_num_hidden_layers"]) == ("qwen3_5_text", 2)
    index = json.loads((own_dir / "model.safetensors.index.json").read_text())["weight_map"]
    names = set(index)
    assert {n.split(".")[0] for n in names} == {"model", "lm_head", "mtp"}
    assert all(n.startswith("model.language_model.") for n in names if n.startswith("model."))
    mtp = {n for n in names if n.startswith("mtp.")}
    assert {"mtp.fc.weight", "mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight",
            "mtp.pre_fc_norm_hidden.weight", "mtp.layers.1.self_attn.q_proj.weight"} <= mtp
    assert not any(".experts." in n for n in mtp)
    shapes = {}
    for shard in sorted(set(index.values())):
        for name, entry in header(own_dir / shard).items():
            if name != "__metadata__":
                assert entry["dtype"] == "BF16", name
                shapes[name] = entry["shape"]
    assert set(shapes) == names
    H, heads, D = text["hidden_size"], text["num_attention_heads"], text["head_dim"]
    assert shapes["mtp.fc.weight"] == [H, 2 * H]
    assert shapes["mtp.layers.0.self_attn.q_proj.weight"] == [2 * heads * D, H]
    assert shapes["mtp.layers.0.self_attn.o_proj.weight"] == [H, heads * D]


def test_only_the_mtp_shard_is_read(own_dir, tmp_path, monkeypatch):
    """load_mtp opens only the shard the index names for mtp.* tensors and reads only those:
    with the language model's shard truncated to garbage it still loads, and every tensor it
    read is an mtp.* one."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(own_dir, copy)
    model = load_model(own_dir)
    shard = copy / "model-00001-of-00002.safetensors"
    assert any(v == shard.name for v in json.loads(
        (copy / "model.safetensors.index.json").read_text())["weight_map"].values())
    shard.write_bytes(b"not a safetensors file")
    read = []
    # every BF16 tensor of a checkpoint, a model's or a head's, is read by this one function
    original = weights_module._read_raw_u16
    monkeypatch.setattr(weights_module, "_read_raw_u16",
                        lambda file, header, name, *rest: read.append(name)
                        or original(file, header, name, *rest))
    head = load_mtp(copy, model)
    assert head.draft.config.num_hidden_layers == 2 and head.draft.config.layer_per_step
    assert read and all(name.startswith("mtp.") for name in read)


def test_chained_step_j_runs_layer_j_mod_n(own_dir, monkeypatch):
    """With two MTP layers, changing layer 1's weights leaves the first MTP step's logits
    (layer 0) unchanged and changes the second's (layer 1): step j runs layer j % n alone."""
    model = load_model(own_dir, dtype="float64")
    seen = []
    pick = mtp_module.pick_tokens
    monkeypatch.setattr(mtp_module, "pick_tokens",
                        lambda logits: seen.append(np.array(logits)) or pick(logits))
    seq = [3, 1, 4, 1, 5, 9, 2, 6]
    logits = []
    for change in (False, True):
        model.reset()
        for pos, t in enumerate(seq):
            model.step(t, pos)
        head = load_mtp(own_dir, model)
        if change:
            head.draft.layers[1].down = head.draft.layers[1].down * 2.0
        head.commit_rows(seq, np.zeros((len(seq), 256)), len(seq))
        seen.clear()
        head.propose(seq[-1], len(seq) - 1, 3, model.last_hidden())
        logits.append([row[0] for row in seen])
    assert np.array_equal(logits[0][0], logits[1][0])  # the target's own choice
    assert np.array_equal(logits[0][1], logits[1][1])  # step 0: layer 0
    assert not np.allclose(logits[0][2], logits[1][2])  # step 1: layer 1


@pytest.mark.parametrize("k", [2, 5])
def test_drafts_through_the_two_pass_round_with_greedys_text(own_dir, k):
    """The checkpoint's own MTP head in onebit.run emits exactly greedy's tokens, and the
    first draft of every batch (the target's own choice) is accepted."""
    model = load_model(own_dir)
    head = load_mtp(own_dir, model)
    prompt = [189, 190, 189, 190, 7]
    reference = onebit.greedy(model, prompt, max_tokens=24)
    result = onebit.run(model, head, prompt, max_tokens=24, k=k)
    assert result.tokens == reference.tokens
    assert result.stats.accepted >= result.stats.batches


def rewrite(path, change_text=None, extra=None):
    """Change the checkpoint in `path`: text_config fields, and/or an extra mtp tensor."""
    raw = json.loads((path / "config.json").read_text())
    if change_text:
        raw["text_config"].update(change_text)
        (path / "config.json").write_text(json.dumps(raw))
    if extra:
        shard = path / "model-00002-of-00002.safetensors"
        tensors = checkpoint_module.read_tensors(path, keep=lambda n: True)
        tensors = {n: v for n, v in tensors.items() if n in header(shard)}
        checkpoint_module.write_bf16(shard, {**tensors, extra: np.zeros(4, np.float32)})
        index_file = path / "model.safetensors.index.json"
        index = json.loads(index_file.read_text())
        index["weight_map"][extra] = shard.name
        index_file.write_text(json.dumps(index))


REFUSALS = {
    "moe-config": ({"num_experts": 8}, None, "'text_config.num_experts' is 8: MoE MTP"),
    "moe-tensor": (None, "mtp.layers.0.mlp.experts.0.gate_proj.weight", "MoE MTP layers"),
    "no-layers": ({"mtp_num_hidden_layers": 0}, None, "mtp_num_hidden_layers' is 0"),
    "own-embeddings": ({"mtp_use_dedicated_embeddings": True}, None,
                       "mtp_use_dedicated_embeddings' is true"),
    "unknown-tensor": (None, "mtp.layers.0.self_attn.sinks", "'mtp.layers.0.self_attn.sinks'"),
    "more-layers": ({"mtp_num_hidden_layers": 2}, None, "missing tensor 'layers.1."),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_it_cannot_compute_is_refused_by_name(tmp_path, case):
    """MoE MTP layers (by config or by tensor), a checkpoint with 0 MTP layers or MTP
    embeddings of their own, an mtp tensor it would not use, a layer the config counts but
    the shards lack: a DraftFileError naming the field or tensor."""
    change, extra, message = REFUSALS[case]
    path = add_own_mtp(fabricate_model(tmp_path / "m", "qwen3_5", quantized=False))
    model = load_model(path)
    rewrite(path, change, extra)
    with pytest.raises(DraftFileError, match=message):
        load_mtp(path, model)


def test_a_checkpoint_without_mtp_is_named(tmp_path):
    """load_own_mtp on a model that has no MTP layers of its own says so."""
    path = fabricate_model(tmp_path / "q", "qwen3", quantized=False)
    with pytest.raises(DraftFileError, match="no field 'mtp_num_hidden_layers'"):
        load_own_mtp(path, load_model(path))


def test_acceptance_without_a_draft_uses_the_checkpoints_own_mtp(own_dir, tmp_path, capsys):
    """`onebit acceptance --head mtp` with no --draft scores the model's own MTP layers: its
    JSON report equals scoring load_mtp(model dir) directly; on a model without MTP layers
    it exits 2 naming what is missing."""
    prompts = tmp_path / "p.txt"
    prompts.write_text("1 2 3 4\n189 190 189 190\n")
    assert cli(acceptance, "acceptance", "--model", own_dir, "--head", "mtp", "--prompt-ids",
               prompts, "--tokens", 10, "--k", 3, "--format", "json") == 0
    got = json.loads(capsys.readouterr().out)
    model = load_model(own_dir)
    direct = score(model, load_mtp(own_dir, model), [[1, 2, 3, 4], [189, 190, 189, 190]],
                   tokens=10, k=3, head_name="mtp", model_name=str(own_dir))
    assert got == json.loads(direct.to_json())
    plain = fabricate_model(tmp_path / "q", "qwen3", quantized=False)
    assert cli(acceptance, "acceptance", "--model", plain, "--head", "mtp", "--prompt-ids",
               prompts) == 2
    assert "no MTP layers of its own" in capsys.readouterr().err


def test_sweep_without_a_draft_uses_the_checkpoints_own_mtp(own_dir, tmp_path, capsys):
    """`onebit sweep --head mtp` with no --draft runs the model's own MTP layers: one row per
    k with exact pass counts, each k's batches accepting at least the target's own choice."""
    from onebit.commands import sweep

    prompts = tmp_path / "p.txt"
    prompts.write_text("189 190 189 190\n")
    assert cli(sweep, "sweep", "--model", own_dir, "--head", "mtp", "--prompt-ids", prompts,
               "--tokens", 8, "--k", "1..2", "--repeats", 1) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 |")
            or line.startswith("| 2 |")]
    assert len(rows) == 2
    for row in rows:
        accepted, _, batches = (int(cell) for cell in row.split("|")[2:5])
        assert accepted >= batches > 0


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 5), min_size=1, max_size=12))
def test_any_chunking_of_commits_leaves_the_same_cache(own_dir, chunks):
    """However the loop hands committed rows over (the prompt at once, then accepted runs of
    any length, each call seeing rows past its count), the own-MTP head's layer-0 cache and
    its next chain equal those of committing one row at a time."""
    model = load_model(own_dir, dtype="float64")
    rng = np.random.default_rng(len(chunks))
    total = sum(chunks)
    tokens = [int(t) for t in rng.integers(0, 256, total + 1)]
    rows = rng.standard_normal((total + 1, 256))
    chunked, single = load_mtp(own_dir, model), load_mtp(own_dir, model)
    start = 0
    for size in chunks:
        chunked.commit_rows(tokens[start:], rows[start:], size)  # extra rows are not counted
        start += size
    for i in range(total):
        single.commit_rows(tokens[i : i + 1], rows[i : i + 1], 1)
    for (k, v), (k1, v1) in zip(chunked._kv, single._kv, strict=True):
        assert len(k) == len(k1)
        np.testing.assert_allclose(k.view(), k1.view(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(v.view(), v1.view(), rtol=1e-9, atol=1e-12)
    assert len(chunked._kv[0][0]) == total - 1  # one pair per committed token after the first
    assert chunked.propose(tokens[total - 1], total - 1, 4, rows[total - 1]) == \
        single.propose(tokens[total - 1], total - 1, 4, rows[total - 1])


def test_mtp_layers_only_come_with_qwen3_5(tmp_path, capsys):
    """`fabricate qwen3 --mtp` and `--mtp 0` exit 2 with one line naming the option."""
    assert cli(fabricate, "fabricate", "qwen3", tmp_path / "q", "--mtp") == 2
    assert "--mtp 1: MTP layers (>= 1) come with a qwen3_5 model only" in capsys.readouterr().err
    assert cli(fabricate, "fabricate", "qwen3_5", tmp_path / "z", "--mtp", 0) == 2
    assert "--mtp 0" in capsys.readouterr().err


def test_add_own_mtp_needs_a_flat_qwen3_5_checkpoint(tmp_path):
    """add_own_mtp refuses, by name, a directory with no flat model.safetensors (a Q4NX
    container, or one already converted) and a checkpoint of another family."""
    q4nx = fabricate_model(tmp_path / "a", "qwen3_5")
    with pytest.raises(DraftFileError, match="no model.safetensors"):
        add_own_mtp(q4nx)
    qwen3 = fabricate_model(tmp_path / "b", "qwen3", quantized=False)
    with pytest.raises(DraftFileError, match="model_type 'qwen3'"):
        add_own_mtp(qwen3)
