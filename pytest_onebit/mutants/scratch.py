"""Scratch copies of a project: where a mutant is applied, never the working tree.

A copy holds the entries a catalogue names; the suite runs there with the copy first on the
import path, and `check_shadowing` proves once per catalogue that the copy (not an editable
install of the working tree) is what gets imported.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

_IGNORED = ("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache", ".ruff_cache")


class ShadowError(RuntimeError):
    """The scratch copy would not be the code under test (the working tree would be imported)."""


def make_scratch(project_root: Path, into: Path, copied: Sequence[str]) -> Path:
    """Copy `copied` (top-level entries; missing ones are skipped) from `project_root` into
    `into`, which must not exist."""
    into.mkdir(parents=True)
    for name in copied:
        src = project_root / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns(*_IGNORED))
        elif src.is_file():
            shutil.copy2(src, into / name)
    return into


def packages_in(scratch: Path) -> tuple[str, ...]:
    """The importable packages at the top of a copy (folders with an __init__.py)."""
    return tuple(sorted(p.parent.name for p in scratch.glob("*/__init__.py")
                        if p.parent.name != "tests"))


def outer_env() -> dict[str, str]:
    """This process's environment less the outer pytest's (or xdist's) variables, and with no
    bytecode written: what a fork server starts in, before any scratch copy is chosen."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "COV_CORE_", "ONEBIT_MUTANT_"))
           and k != "PYTHONSTARTUP"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def scratch_env(scratch: Path, extra_path: Sequence[Path] = ()) -> dict[str, str]:
    """The environment a suite runs in: the scratch copy (then `extra_path`) first on the
    import path, and none of the outer pytest's (or xdist's) variables."""
    env = outer_env()
    outer = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), *map(str, extra_path),
                                         *([outer] if outer else [])])
    # git apply must not find a repository above the scratch directory
    env["GIT_CEILING_DIRECTORIES"] = str(scratch.parent)
    return env


def check_shadowing(scratch: Path, packages: Sequence[str],
                    python: str = sys.executable) -> dict[str, str]:
    """Import `packages` in the scratch environment and make sure they come from the copy, not
    from the working tree (an editable install). Raises `ShadowError` if not."""
    if not packages:
        raise ShadowError(f"the scratch copy {scratch} holds no package to check: name them in "
                          "catalogue.toml (`packages = [...]`)")
    code = ("import importlib, json, sys; "
            "print(json.dumps({n: importlib.import_module(n).__file__ for n in sys.argv[1:]}))")
    proc = subprocess.run([python, "-c", code, *packages], cwd=scratch,
                          env=scratch_env(scratch), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise ShadowError(f"cannot import {list(packages)} in the scratch copy {scratch}:\n"
                          f"{proc.stderr.strip()}")
    return verify_shadowing(scratch, json.loads(proc.stdout.strip().splitlines()[-1]))


def verify_shadowing(scratch: Path, files: dict[str, str]) -> dict[str, str]:
    """Raise `ShadowError` unless every package of `files` (name -> the file it was imported
    from) came from inside the scratch copy; return `files`."""
    failed = {m: f[1:] for m, f in files.items() if isinstance(f, str) and f.startswith("!")}
    if failed:
        raise ShadowError(f"cannot import {sorted(failed)} in the scratch copy {scratch}: "
                          f"{failed}")
    root = scratch.resolve()
    outside = {m: f for m, f in files.items()
               if f is None or root not in Path(f).resolve().parents}
    if outside:
        raise ShadowError(
            f"the scratch copy does not shadow the installed package: {outside} are imported "
            f"from outside {root}; mutants would run against the working tree"
        )
    return files


def apply_diff(scratch: Path, diff: str) -> str | None:
    """`git apply` the diff in `scratch`; None when it applied, else git's complaint."""
    patch = scratch.parent / "mutant.patch"
    patch.write_text(diff, encoding="utf-8")
    try:
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(patch)], cwd=scratch,
                              env=scratch_env(scratch), capture_output=True, text=True)
    except FileNotFoundError:
        return "git is not installed (the runner applies mutants with `git apply`)"
    if proc.returncode != 0:
        return (proc.stderr or proc.stdout).strip() or f"git apply exited {proc.returncode}"
    return None
