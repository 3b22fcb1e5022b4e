"""tests/peer_modules.py, the stand-in the peer tests import torch and transformers through:
it imports nothing until a test reads a public attribute, and a module that cannot be imported
skips that test instead of failing it."""

from __future__ import annotations

import sys

import pytest
from peer_modules import lazy

UNUSED_STDLIB = "tabnanny"  # a module nothing in the suite imports


def test_nothing_is_imported_until_a_public_attribute_is_read():
    """Making the stand-in and pytest-style probing of private names (what collection does to
    a module-level object) leave the module unimported; the first public read imports it and
    returns the module's own attribute."""
    if UNUSED_STDLIB in sys.modules:
        pytest.skip(f"{UNUSED_STDLIB} was imported by something else in this process")
    stand_in = lazy(UNUSED_STDLIB)
    for probe in ("_pytestfixturefunction", "__wrapped__", "__test__"):
        assert not hasattr(stand_in, probe)
    assert UNUSED_STDLIB not in sys.modules
    assert stand_in.check is sys.modules[UNUSED_STDLIB].check
    assert stand_in.__file__ == sys.modules[UNUSED_STDLIB].__file__


def test_a_module_that_cannot_be_imported_skips_the_test_that_reads_it():
    """Reading from a missing module raises pytest's skip, naming the module, as
    `pytest.importorskip` would have at import."""
    missing = lazy("onebit_no_such_module")
    with pytest.raises(pytest.skip.Exception, match="could not import 'onebit_no_such_module'"):
        _ = missing.anything
