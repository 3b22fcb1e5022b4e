"""Run a catalogue: each mutant in its own scratch copy, next to the unmutated baseline."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pytest_onebit.mutants.catalogue import Catalogue, Mutant, load_catalogue, select
from pytest_onebit.mutants.scratch import (
    apply_diff,
    check_shadowing,
    make_scratch,
    packages_in,
)
from pytest_onebit.mutants.suite_run import DEFAULT_TIMEOUT_S, SuiteRun, run_suite
from pytest_onebit.mutants.verdicts import CatalogueReport, MutantResult, verdict_of


def run_mutant(
    project_root: str | os.PathLike[str],
    mutant: Mutant | None,
    *,
    copied: Sequence[str],
    pytest_args: Sequence[str],
    packages: Sequence[str] | None = None,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    verify_shadowing: bool = False,
) -> tuple[SuiteRun, dict[str, str]]:
    """Apply `mutant` (None: the unmutated baseline) to a fresh scratch copy of the project and
    run the suite there. The scratch copy is removed afterwards; the working tree is only read.
    Returns the run and, with `verify_shadowing`, where the packages were imported from."""
    root = Path(project_root).resolve()
    label = mutant.number if mutant else "baseline"
    with tempfile.TemporaryDirectory(prefix=f"onebit-mutant-{label}-") as tmp:
        scratch = make_scratch(root, Path(tmp) / "project", copied)
        imported = {}
        if verify_shadowing:
            imported = check_shadowing(scratch, packages or packages_in(scratch), python)
        if mutant is not None:
            complaint = apply_diff(scratch, mutant.diff)
            if complaint is not None:
                return SuiteRun(None, detail=f"the diff no longer applies: {complaint}"), imported
        return run_suite(scratch, pytest_args, python=python, timeout_s=timeout_s), imported


def run_catalogue(
    project_root: str | os.PathLike[str],
    folder: str | os.PathLike[str] | None = None,
    *,
    jobs: int = 2,
    test_paths: Sequence[str] | None = None,
    only: Iterable[str] | None = None,
    catalogue: Catalogue | None = None,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CatalogueReport:
    """Run every mutant of the catalogue in `folder` (default `<project_root>/mutants/loop`)
    against its suite (`test_paths` overrides the config's pytest arguments), `jobs` at a
    time, next to one run of the unmutated copy.

    Raises `CatalogueError` for a malformed catalogue, `ShadowError` if a scratch copy would
    not shadow the installed package, and `ValueError` for bad arguments."""
    root = Path(project_root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"no project folder at {root}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    if catalogue is None:
        catalogue = load_catalogue(root / "mutants" / "loop" if folder is None else folder, root)
    config = catalogue.config
    mutants = select(catalogue.mutants, only) if only else list(catalogue.mutants)
    pytest_args = tuple(test_paths) if test_paths else config.tests
    copied = config.copied(root, catalogue.folder)
    start = time.perf_counter()

    def one(mutant: Mutant | None, verify: bool = False) -> tuple[SuiteRun, dict[str, str]]:
        return run_mutant(root, mutant, copied=copied, pytest_args=pytest_args,
                          packages=config.packages, python=python, timeout_s=timeout_s,
                          verify_shadowing=verify)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        # The baseline also proves (once) that a scratch copy shadows the installed package;
        # a ShadowError from it is raised here, before any verdict is trusted.
        baseline_future = pool.submit(one, None, True)
        futures = [pool.submit(one, m) for m in mutants]
        try:
            baseline, imported = baseline_future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        results = [MutantResult(m, verdict_of(m, f.result()[0]), f.result()[0])
                   for m, f in zip(mutants, futures, strict=True)]
    return CatalogueReport(results, baseline, time.perf_counter() - start, jobs, pytest_args,
                           imported, config.name, config.description)
