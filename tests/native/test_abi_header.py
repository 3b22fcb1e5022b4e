"""The shipped header and its ctypes mirror agree: a C probe compiled against onebit_abi.h
prints every struct's size and field offsets, and onebit.abi.layout must say the same."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

import onebit.abi
from onebit.abi import layout as L

STRUCTS = {"onebit_base": L.Base, "onebit_head": L.Head, "onebit_stats": L.Stats}


def test_include_dir_holds_the_header():
    """include_dir() is the folder of onebit_abi.h, which declares version 1."""
    header = onebit.abi.include_dir() / "onebit_abi.h"
    assert header == onebit.abi.header_path() and header.is_file()
    assert f"#define ONEBIT_ABI_VERSION {onebit.abi.ABI_VERSION}" in header.read_text()


def test_ctypes_layout_matches_the_header(tmp_path):
    """sizeof and offsetof of every field, from the C compiler, equal ctypes' (so a field
    added to one and not the other fails here)."""
    from pytest_onebit.native.build import find_compiler

    cc = find_compiler(cpp=False)
    if cc is None:
        pytest.skip("no C compiler on PATH (cc)")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <onebit_abi.h>",
             "int main(void) {"]
    for name, struct in STRUCTS.items():
        lines.append(f'printf("{name} %zu\\n", sizeof({name}));')
        for field, _ in struct._fields_:
            lines.append(f'printf("{name}.{field} %zu\\n", offsetof({name}, {field}));')
    lines.append("return 0; }")
    source = tmp_path / "probe.c"
    source.write_text("\n".join(lines))
    exe = tmp_path / "probe"
    subprocess.run([cc, f"-I{onebit.abi.include_dir()}", str(source), "-o", str(exe)],
                   check=True, timeout=120)
    got = dict(line.split() for line in subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    want = {}
    for name, struct in STRUCTS.items():
        want[name] = str(ctypes.sizeof(struct))
        for field, _ in struct._fields_:
            want[f"{name}.{field}"] = str(getattr(struct, field).offset)
    assert got == want
