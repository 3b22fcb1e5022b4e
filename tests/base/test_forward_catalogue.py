"""The forward mutant catalogue (mutants/forward/) is well formed, names only base checks,
covers every one of them and the bugs the base contract exists for, and applies to the source
as it is now. (Whether each mutant is killed is `onebit mutants --catalogue mutants/forward`.)"""

from __future__ import annotations

from pathlib import Path

from pytest_onebit.base.checks import BASE_CHECKS
from pytest_onebit.mutants import load_catalogue
from pytest_onebit.mutants.scratch import apply_diff, make_scratch

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "mutants" / "forward"

# The five rollback mutants, the field's bugs, and the ones the issue lists by name.
REQUIRED = (
    "01-last-hidden-last-row",  # the survivor of the forward's own tests
    "02-gdn-state-last-row", "03-length-not-rolled-back", "04-last-rows-off-by-one",
    "05-taps-of-every-row",
    "06-gdn-stale-after-partial",  # vLLM #39273
    "07-conv-copy-element-count",  # llama.cpp #20700
    "08-kv-keeps-rejected-row",  # ik_llama.cpp #1949
    "09-taps-miss-last-after-full-accept",  # vLLM #5765
    "10-conv-from-wrong-row", "11-gdn-snapshot-shared", "12-kv-row-wrong-position",
    "13-rope-off-by-one-in-batch", "14-verify-batched-lm-head",
)


def test_forward_catalogue_parses_and_names_base_checks():
    """Every forward mutant has a header whose `# breaks:` names only base check ids, changes
    only the forward's source, and the required mutants are all there; every base check is
    named by some mutant."""
    catalogue = load_catalogue(FOLDER, ROOT)
    ids = {c.id for c in BASE_CHECKS.values()}
    names = [m.name for m in catalogue.mutants]
    assert set(REQUIRED) <= set(names)
    for m in catalogue.mutants:
        assert set(m.breaks) <= ids, (m.name, m.breaks)
        assert all(f.startswith("onebit/models/") for f in m.files), (m.name, m.files)
    assert {b for m in catalogue.mutants for b in m.breaks} == ids


def test_every_forward_mutant_applies_to_the_current_source(tmp_path):
    """Each forward mutant still applies, and changes the file it names (checked in scratch
    copies, never the working tree)."""
    catalogue = load_catalogue(FOLDER, ROOT)
    for m in catalogue.mutants:
        scratch = make_scratch(ROOT, tmp_path / m.number / "project", ("onebit",))
        assert apply_diff(scratch, m.diff) is None, m.name
        for rel in m.files:
            assert (scratch / rel).read_bytes() != (ROOT / rel).read_bytes(), (m.name, rel)
