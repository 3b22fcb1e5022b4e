"""Compiling C and C++ sources into a shared library with the system compiler, into a
temporary folder (never the source tree), once per distinct source and flags."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from onebit.abi import include_dir

COMPILE_TIMEOUT = 300


class CompileError(RuntimeError):
    """The compiler refused the sources; the message holds its first lines."""


def find_compiler(cpp: bool) -> str | None:
    """The system compiler for C++ (`$CXX`, g++, c++, clang++) or C (`$CC`, cc, gcc, clang)."""
    names = [os.environ.get("CXX" if cpp else "CC")] + (
        ["g++", "c++", "clang++"] if cpp else ["cc", "gcc", "clang"])
    for name in names:
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compile_library(sources: list[Path], *, out_dir: Path | None = None,
                    flags: tuple[str, ...] = ("-O1",), name: str | None = None) -> Path:
    """`sources` built into a `.so` with the header's folder on the include path; the file is
    named after a hash of the sources and flags, so an unchanged build is reused."""
    sources = [Path(s) for s in sources]
    cpp = any(s.suffix in (".cpp", ".cc", ".cxx") for s in sources)
    compiler = find_compiler(cpp)
    if compiler is None:
        raise CompileError(f"no {'C++' if cpp else 'C'} compiler on PATH")
    digest = hashlib.sha256()
    for s in sources:
        digest.update(s.read_bytes())
    digest.update(" ".join(flags).encode())
    digest.update((include_dir() / "onebit_abi.h").read_bytes())
    out_dir = Path(out_dir) if out_dir is not None else \
        Path(tempfile.gettempdir()) / f"onebit-native-{os.getuid()}"
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{name or sources[0].stem}-{digest.hexdigest()[:16]}.so"
    if target.exists():
        return target
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    std = ["-std=c++17"] if cpp else ["-std=c11"]
    command = [compiler, *std, "-shared", "-fPIC", *flags, f"-I{include_dir()}",
               *map(str, sources), "-o", str(partial)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        first = "\n".join(done.stderr.splitlines()[:12])
        raise CompileError(f"{' '.join(command)} failed:\n{first}")
    partial.replace(target)  # atomic: a parallel build of the same sources is harmless
    return target
