"""The packed-kernel mutant catalogue (mutants/kernel/) is well formed, names only the kernel
checks K1..K3 that tests/forward/test_packed_kernel.py defines, and applies to the source as it
is now. (Whether each mutant is killed is `onebit mutants --catalogue mutants/kernel`.)"""

from __future__ import annotations

import re
from pathlib import Path

from pytest_onebit.mutants import load_catalogue
from pytest_onebit.mutants.scratch import apply_diff, make_scratch

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "mutants" / "kernel"
CHECKS = ROOT / "tests" / "forward" / "test_packed_kernel.py"


def test_kernel_catalogue_names_the_kernel_checks():
    """Every kernel mutant patches the packed kernel only and names checks that exist as test
    functions (`test_K1_...`), and every such check is named by some mutant."""
    catalogue = load_catalogue(FOLDER, ROOT)
    ids = set(re.findall(r"^def test_(K\d+)_", CHECKS.read_text(), flags=re.M))
    assert ids == {"K1", "K2", "K3"}
    assert catalogue.mutants
    for m in catalogue.mutants:
        assert set(m.breaks) <= ids, (m.name, m.breaks)
        assert m.files == ("onebit/models/q4nx_kernel.py",), (m.name, m.files)
    assert {b for m in catalogue.mutants for b in m.breaks} == ids


def test_every_kernel_mutant_applies_to_the_current_source(tmp_path):
    """Each kernel mutant still applies and changes the kernel (in scratch copies)."""
    catalogue = load_catalogue(FOLDER, ROOT)
    for m in catalogue.mutants:
        scratch = make_scratch(ROOT, tmp_path / m.number / "project", ("onebit",))
        assert apply_diff(scratch, m.diff) is None, m.name
        for rel in m.files:
            assert (scratch / rel).read_bytes() != (ROOT / rel).read_bytes(), (m.name, rel)
