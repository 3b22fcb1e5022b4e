"""The heads shipped inside the package (`onebit.heads.shipped`): each is whole and pinned,
small, found for its base file only, refused when damaged, and drafts in the engine what it
measured when it was trained."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from onebit.heads import shipped
from onebit.heads.eagle import CONFIG_FILE, WEIGHTS_FILE, load_eagle
from onebit.heads.errors import DraftFileError, DraftMismatchError

#: the most a shipped head's files may weigh together (the issue's bound)
MOST_BYTES = 8 * 1000 * 1000


def test_there_is_a_shipped_head_for_smollm2():
    """SmolLM2-135M-Instruct Q4_1, the default model, has a shipped head pinned to the
    sha256 of the file `onebit pull smollm2` fetches (onebit.hub pins the same)."""
    from onebit.hub import known

    smollm2 = known("smollm2")
    assert any((e.base_file, e.base_sha256) == (smollm2.file_name, smollm2.sha256)
               for e in shipped.SHIPPED)


@pytest.mark.parametrize("entry", shipped.SHIPPED, ids=lambda e: e.name)
def test_each_shipped_head_is_whole_pinned_small_and_for_its_base(entry):
    """Both files are there with their pinned sha256, weigh at most 8 MB together, the
    config names the pinned base (file and sha256), the weights are float16, and the config
    records how the head was made and the held-out acceptance it measured."""
    path = entry.verified()
    size = sum((path / f).stat().st_size for f in (CONFIG_FILE, WEIGHTS_FILE))
    assert size <= MOST_BYTES
    config, tensors = load_eagle(path)
    assert (config.base_file, config.base_sha256) == (entry.base_file, entry.base_sha256)
    from safetensors import safe_open

    with safe_open(str(path / WEIGHTS_FILE), "np") as f:
        names = [n for n in f.keys() if n != "d2t"]  # noqa: SIM118 (not a dict)
        assert {f.get_slice(n).get_dtype() for n in names} == {"F16"}
    assert len(config.trained["acceptance_conditional"]) == config.max_chain
    assert "onebit train-head" in entry.made_by


def test_a_damaged_shipped_head_is_refused_by_name(tmp_path, monkeypatch):
    """A shipped head whose weights differ by one byte from the pinned ones, or whose config
    is missing, is a DraftFileError naming the file, before anything in it is read."""
    entry = shipped.SHIPPED[0]
    copy = tmp_path / entry.name
    shutil.copytree(entry.path, copy)
    monkeypatch.setattr(shipped, "ROOT", tmp_path)
    entry.verified()  # the copy is whole
    raw = bytearray((copy / WEIGHTS_FILE).read_bytes())
    raw[-1] ^= 1
    (copy / WEIGHTS_FILE).write_bytes(bytes(raw))
    with pytest.raises(DraftFileError, match=f"{WEIGHTS_FILE}: sha256"):
        entry.verified()
    (copy / CONFIG_FILE).unlink()
    with pytest.raises(DraftFileError, match=f"{CONFIG_FILE}: missing"):
        entry.verified()


def test_no_shipped_head_is_found_for_another_file(tmp_path):
    """A file named like a shipped head's base but with other bytes finds no shipped head:
    the sha256 decides, not the name."""
    other = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    other.write_bytes(b"GGUF" + bytes(64))
    assert shipped.shipped_for(other) is None


@pytest.mark.slow
def test_the_shipped_head_is_found_for_smollm2_and_refused_for_another_base(tmp_path,
                                                                            monkeypatch):
    """With no head of the user's own, `trained_head` finds the shipped head for SmolLM2's
    file; loading that head for a fabricated base of other sizes, or naming another file as
    its base, is a DraftMismatchError that names the file it was made for."""
    from onebit.heads.eagle import load_head
    from onebit.heads.registry import trained_head
    from onebit.hub import skip_unless_cached
    from onebit.models import fabricate_model, load_model
    from onebit.text.load import load_text_model

    path = skip_unless_cached("smollm2")  # before ONEBIT_HOME moves: the real cache's file
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))  # no head of the user's own
    model = load_text_model(path, kernel="int8")
    head = trained_head(model)
    assert head is not None and head.config.base_file == path.name
    other = load_model(fabricate_model(tmp_path / "f", "qwen3", quantized=False))
    with pytest.raises(DraftMismatchError, match=path.name):
        load_head(shipped.SHIPPED[0].path, other)
    fake = tmp_path / "other.gguf"
    fake.write_bytes(b"not the base")
    with pytest.raises(DraftMismatchError, match=path.name):
        load_head(shipped.SHIPPED[0].path, model, base_path=fake)


@pytest.mark.slow
def test_the_engine_drafts_what_the_shipped_head_measured_when_trained():
    """The engine's compiled chain, fed SmolLM2's own rows on the held-out prompts' greedy
    answers, gets the first draft right as often as the training recorded (within 2 points:
    the engine's products are q8_0, training's float): a head fed the wrong tap, a d2t map off
    by one or a chain on the wrong state would fall far below."""
    import onebit
    from onebit.heads.eagle import load_head
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model
    from onebit.train.prompts import HELD_OUT

    path = skip_unless_cached("smollm2")
    model = load_text_model(path, kernel="int8")
    entry = next(e for e in shipped.SHIPPED if e.base_file == path.name)
    config = json.loads((entry.path / CONFIG_FILE).read_text())
    recorded = config["trained"]["acceptance_conditional"][0]
    held = HELD_OUT[: config["trained"]["recipe"]["held_out"]]
    head = load_head(entry.verified(), model, base_path=path)
    right = asked = 0
    for prompt in held:
        gen = onebit.generate(model, prompt, max_tokens=config["trained"]["recipe"][
            "max_tokens"], head=None)
        ids = list(gen.prompt_ids) + list(gen.result.tokens)
        start = len(gen.prompt_ids)
        model.reset()
        head.reset()
        rows = model.verify(ids[:start], 0)
        model.commit_verify(start)
        head.commit_rows(ids[:start], model.last_hidden_rows(), start)
        for t in range(start, len(ids) - 1):
            # the base committed position t - 1 and picked ids[t]; the draft guesses ids[t + 1]
            draft = head.propose(ids[t], t, 1, None)
            right += int(draft[:1] == [ids[t + 1]])
            asked += 1
            rows = model.verify([ids[t]], t)
            model.commit_verify(1)
            head.commit_rows([ids[t]], model.last_hidden_rows(), 1)
        del rows
    measured = right / asked
    assert abs(measured - recorded) < 0.02, (measured, recorded)
    assert np.isfinite(measured)


@pytest.mark.slow
def test_auto_runs_the_hybrid_over_the_shipped_head_when_switched_on(monkeypatch, tmp_path):
    """With `USE_TRAINED_BY_DEFAULT` on, `auto` on SmolLM2 is the policy over the hybrid over
    the shipped head, and its text is plain decode's; off (the default, docs/heads.md), it is
    the policy over prompt lookup."""
    import onebit
    from onebit.heads import registry as gen
    from onebit.heads.hybrid import HybridHead
    from onebit.heads.ngram import NgramHead
    from onebit.hub import skip_unless_cached
    from onebit.text.load import load_text_model

    path = skip_unless_cached("smollm2")
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path / "home"))
    model = load_text_model(path, kernel="int8")
    assert isinstance(gen.auto_head(model).inner, NgramHead)
    monkeypatch.setattr(gen, "USE_TRAINED_BY_DEFAULT", True)
    head = gen.auto_head(model)
    assert isinstance(head.inner, HybridHead)
    prompt = "List five things to pack for a weekend camping trip."
    assert (onebit.generate(model, prompt, max_tokens=40).text
            == onebit.generate(model, prompt, max_tokens=40, head="none").text)
