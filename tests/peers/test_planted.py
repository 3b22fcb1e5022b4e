"""Each transformers arm is itself proved: a copy of transformers' own code with one planted
bug, swapped in with monkeypatch, must fail the check that covers it, while the untouched
peer passes the same check (tests/peers/test_peer_command.py runs it whole).

The copy is made from the installed release's source, with one line edited; a release whose
source lacks the line skips the test, naming it."""

from __future__ import annotations

import inspect
import textwrap

import pytest
from peer_modules import lazy

# half a minute of transformers' own generate with a bug planted in it: CI's slow step runs
# them (`.ci/run`), which keeps README line 2 within its four minutes on two cores
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("quiet_transformers")]

# imported when a test runs: every worker collects this module, one runs it (peer_modules)
judge = lazy("pytest_onebit.peers.judge")
hf_sampled = lazy("pytest_onebit.peers.hf_sampled")
hf_toy_arms = lazy("pytest_onebit.peers.hf_toy_arms")

def plant(monkeypatch, module, qualname: str, old: str, new: str) -> None:
    """Replace `module.qualname` by a copy of its source with `old` edited to `new`."""
    import transformers

    *path, name = qualname.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    source = textwrap.dedent(inspect.getsource(getattr(owner, name)))
    if source.count(old) != 1:
        pytest.skip(f"transformers {transformers.__version__}: {qualname} has no line "
                    f"{old!r} to plant a bug in")
    namespace = dict(vars(module))
    exec(compile(source.replace(old, new), f"<planted {qualname}>", "exec"), namespace)
    monkeypatch.setattr(owner, name, namespace[name])


def outcome(fn) -> str:
    return judge.judged(fn).status


def test_wrong_cache_crop_fails_I1(monkeypatch):
    """A target cache cropped one token short of the rejected drafts (one rejected draft
    stays in) changes the toy's history, so I1-text fails with a garbage assistant; unplanted,
    the same run passes."""
    from transformers.generation import utils

    arm = hf_toy_arms.ToyArm("garbage")
    assert outcome(lambda: arm.text(hf_toy_arms.PROMPTS[0], 3)) == "passed"
    plant(monkeypatch, utils, "GenerationMixin._assisted_decoding",
          "number_of_tokens_to_crop = candidate_length - n_matches",
          "number_of_tokens_to_crop = candidate_length - n_matches - 1")
    assert outcome(lambda: arm.text(hf_toy_arms.PROMPTS[0], 3)) == "failed"


def test_budget_not_enforced_fails_I9(monkeypatch):
    """Assisted decoding that keeps a round's whole accepted block past max_new_tokens (the
    cut to the budget dropped) returns too many tokens with prompt lookup, whose drafts run
    to the end of the budget: I9-budget fails (transformers #46993, planted back)."""
    from transformers.generation import utils

    arm = hf_toy_arms.ToyArm("lookup")
    assert outcome(lambda: arm.budget(2)) == "passed"
    plant(monkeypatch, utils, "GenerationMixin._assisted_decoding",
          "valid_tokens = valid_tokens[:, :tokens_budget]", "valid_tokens = valid_tokens")
    assert outcome(lambda: arm.budget(2)) == "failed"


def test_short_drafts_fail_I7(monkeypatch):
    """An assistant that drafts one token fewer than asked keeps the text right but costs
    more target passes: I7-pass-law fails while I1-text passes."""
    from transformers.generation import candidate_generator as cg

    arm = hf_toy_arms.ToyArm("perfect")
    plant(monkeypatch, cg, "AssistedCandidateGenerator._calculate_new_tokens",
          "min(int(self.num_assistant_tokens),", "min(int(self.num_assistant_tokens) - 1,")
    assert outcome(lambda: arm.text(hf_toy_arms.PROMPTS[0], 4)) == "passed"
    assert outcome(lambda: arm.law(hf_toy_arms.PROMPTS[0], 4)) == "failed"


def test_wrong_residual_fails_S1(monkeypatch):
    """Speculative sampling that draws a rejected draft's replacement from norm(max(0, q - p))
    instead of norm(max(0, p - q)) samples outputs plain sampling never gives: S1 fails."""
    from transformers.generation import utils

    plant(monkeypatch, utils, "_speculative_sampling",
          "torch.clamp((p_n_plus_1 - q_n_plus_1), min=0)",
          "torch.clamp((q_n_plus_1 - p_n_plus_1), min=0)")
    judged = hf_sampled.SampledArm(plain=False, delta=0.5).judge()
    assert judged["S1-distribution"].status == "failed"


def test_stop_ignored_fails_I10(monkeypatch):
    """A generate that drops the consumer's stopping criteria altogether runs to the budget:
    I10-stopping-criteria fails with the garbage assistant, which passes it unplanted (its
    blocks are one token, so #48039's overshoot cannot happen there)."""
    from transformers.generation import utils

    arm = hf_toy_arms.ToyArm("garbage")
    assert outcome(arm.stopping_criteria) == "passed"
    plant(monkeypatch, utils, "GenerationMixin._get_stopping_criteria",
          "criteria = self._merge_criteria_processor_list(criteria, stopping_criteria)",
          "criteria = criteria")
    assert outcome(arm.stopping_criteria) == "failed"


@pytest.mark.slow
def test_residual_drawn_from_p_passes_the_garbage_arm_and_fails_the_sharp_one(monkeypatch):
    """A rejected draft's replacement drawn from the target's p instead of norm(max(0, p - q)):
    where q never overlaps p (the garbage assistant) the two are the same distribution, so
    that arm passes it, blind; with the swapped assistant, whose q overlaps p, the first
    token's distribution moves by about 0.12 and the sharp arm (TV 0.05, 99 % power) fails."""
    from transformers.generation import utils

    plant(monkeypatch, utils, "_speculative_sampling",
          "torch.clamp((p_n_plus_1 - q_n_plus_1), min=0)", "p_n_plus_1.clone()")
    assert hf_sampled.SampledArm(assistant="garbage").judge()["S1-distribution"].status == "passed"
    sharp = hf_sampled.SampledArm(assistant="swapped").judge()["S1-distribution"]
    assert sharp.status == "failed", sharp.detail
    assert "under plain sampling" in sharp.detail


@pytest.mark.slow
def test_greedy_draft_reporting_a_soft_q_fails_the_sharp_arm(monkeypatch):
    """An assistant that drafts its argmax while the ratio test is handed its soft q (its
    generate told do_sample=False, its raw logits reported as the scores): every draft is
    held to a probability it was not drawn with, and the sharp arm fails."""
    from transformers.generation import candidate_generator as cg

    plant(monkeypatch, cg, "AssistedCandidateGenerator._prepare_generation_args",
          '"generation_config": self.generation_config,',
          '"generation_config": self.generation_config, "do_sample": False,')
    sharp = hf_sampled.SampledArm(assistant="swapped").judge()["S1-distribution"]
    assert sharp.status == "failed", sharp.detail


def test_processors_blind_to_the_drafts_fail_N4(monkeypatch):
    """Verify rows processed with the committed prefix only (every row's logits processors
    see the text before the drafts, not the drafts before that row: the penalty history
    that misses the drafts, TensorRT-LLM PR #17701's and vLLM #18902's kind) change a
    knob's answer under speculation, so N4-knobs fails on a real arm (gemma's: its answer
    repeats a token within a round of drafts); unplanted it passes."""
    from transformers.generation import utils

    from pytest_onebit.peers.hf_real import RealArm

    arm = RealArm("gemma")
    assert arm.knobs().status == "passed"
    plant(monkeypatch, utils, "GenerationMixin._assisted_decoding",
          "logits_processor(candidate_input_ids[:, : cur_len + i], new_logits[:, i, :])",
          "logits_processor(candidate_input_ids[:, :cur_len], new_logits[:, i, :])")
    planted = arm.knobs()
    assert planted.status == "failed", planted.detail
    assert "DIFFERS" in planted.detail
