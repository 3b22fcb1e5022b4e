"""benchmarks/stack_parts.py times copies of the compiled stack with parts emptied by text
patches of fused.py: each patch must still match the source, or the benchmark would stop (or,
worse, time a copy that kept the part it claims to leave out)."""

import importlib.util
from pathlib import Path

import pytest

from onebit.models import fused

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stack_parts.py"


def load_script():
    spec = importlib.util.spec_from_file_location("stack_parts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("arm", ["no products", "no attention", "no silu"])
def test_every_patch_matches_the_stack_source(arm):
    """Each arm's patches occur in fused.py and change it, so the copy empties the part it
    names; the arms are cumulative (each holds the one before's patches)."""
    bench = load_script()
    source = Path(fused.__file__).read_text()
    patches = bench.ARMS[arm]
    assert patches, arm
    for old, new in patches:
        assert old != new
        assert old in source, old
    names = list(bench.ARMS)
    before = bench.ARMS[names[names.index(arm) - 1]]
    assert patches[: len(before)] == before


def test_patches_reach_what_they_name_and_nothing_else():
    """The stack runs its products in four `prange(n_s)` loops (q/k/v, o, gate/up, down), and
    the no-products patch, a replace of every occurrence, reaches all four; every other patch
    matches one place only, so it empties nothing it does not name."""
    bench = load_script()
    source = Path(fused.__file__).read_text()
    counts = {old: source.count(old) for old, _ in bench.ARMS["no silu"]}
    assert counts.pop("for p in prange(n_s):") == 4
    assert set(counts.values()) == {1}, counts
