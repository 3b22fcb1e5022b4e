"""Scratch copies of a project: where a mutant is applied, never the working tree.

A copy holds the entries a catalogue names; the suite runs there with the copy first on the
import path, and `check_shadowing` proves once per catalogue that the copy (not an editable
install of the working tree) is what gets imported.

A copy's files are hard links to the project's where the filesystem allows (a plain copy
otherwise): `onebit prove` makes one copy per mutant, about 160 of them, and copying 450 files
each time cost a quarter of a second of system time apiece. A link shares its file with the
working tree, so nothing may write through one: `apply_diff` first gives every file the diff
touches a private copy (`unshare`), and only then lets `git apply` change it. The suites write
nothing into the project (bytecode is off: `outer_env`; kernels go to their own cache).
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


def make_scratch(project_root: Path, into: Path, copied: Sequence[str], *,
                 link: bool = True) -> Path:
    """Copy `copied` (top-level entries; missing ones are skipped) from `project_root` into
    `into`, which must not exist: each file a hard link where the filesystem allows and `link`
    is set, else a copy (see the module's docstring for why a link is safe here)."""
    into.mkdir(parents=True)
    copy = _link_or_copy if link else shutil.copy2
    for name in copied:
        src = project_root / name
        if src.is_dir():
            shutil.copytree(src, into / name, ignore=shutil.ignore_patterns(*_IGNORED),
                            copy_function=copy)
        elif src.is_file():
            copy(src, into / name)
    return into


def _link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or one without hard links
        shutil.copy2(src, dst)
    return str(dst)


def unshare(path: Path) -> None:
    """Give `path` a file of its own if it is a hard link, so writing it leaves every other
    name of the file (the working tree's) as it was."""
    if path.is_file() and not path.is_symlink() and path.stat().st_nlink > 1:
        private = path.with_name(path.name + ".unshared")
        shutil.copy2(path, private)
        os.replace(private, path)


def diff_targets(diff: str) -> list[str]:
    """The paths a unified diff reads or writes (its `--- a/...` and `+++ b/...` lines)."""
    paths = []
    for line in diff.splitlines():
        if line.startswith(("--- ", "+++ ")):
            name = line[4:].split("\t", 1)[0].strip()
            if name != "/dev/null":
                paths.append(name[2:] if name.startswith(("a/", "b/")) else name)
    return list(dict.fromkeys(paths))


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
    """`git apply` the diff in `scratch`; None when it applied, else git's complaint. Every file
    the diff names is unshared first: whatever `git apply` does to it, the working tree's file,
    which a linked copy shares, stays as it was."""
    root = scratch.resolve()
    for name in diff_targets(diff):
        target = (scratch / name).resolve()
        if root in target.parents:  # git apply refuses a path outside; nothing to unshare
            unshare(target)
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
