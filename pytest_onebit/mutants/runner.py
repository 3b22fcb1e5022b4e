"""Run catalogues: each mutant in its own scratch copy, next to the unmutated baseline.

Every run of every catalogue goes into one queue, `jobs` at a time, so no core waits for the
tail of one catalogue before the next starts. A mutant's run stops once its verdict is known
(`stop`, stop_plugin.py), and runs fork from a warm server where the platform forks (`fork`,
forkserver.py).

A catalogue's baseline (its suite on the unmutated copy) runs once its mutants are done. With
`stop="never"` it runs the whole suite. With `first-kill` or `named` it runs the tests that
failed under some mutant, and only those (the whole suite when none failed). A verdict rests
on those tests alone: each kill is then shown to be the mutant's doing, and a survivor passed
the whole suite in its own run. The rest of the suite is not needed, and in the catalogues
that compile kernels it was most of the baseline's time.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from contextlib import ExitStack
from pathlib import Path

from pytest_onebit.mutants.catalogue import Catalogue, Mutant, load_catalogue, select
from pytest_onebit.mutants.jobs import PriorityPool
from pytest_onebit.mutants.launch import ForkPool, Launcher, can_fork
from pytest_onebit.mutants.scratch import (
    ShadowError,
    apply_diff,
    check_shadowing,
    make_scratch,
    packages_in,
)
from pytest_onebit.mutants.scratch import (
    verify_shadowing as _verify_shadowing,
)
from pytest_onebit.mutants.suite_run import DEFAULT_TIMEOUT_S, SuiteRun, run_suite
from pytest_onebit.mutants.verdicts import CatalogueReport, MutantResult, verdict_of

#: `onebit mutants` credits every failing test (the full table); `onebit prove` stops a
#: mutant's run at the first failing test of a check its header names.
DEFAULT_STOP = "never"


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
    stop: str = DEFAULT_STOP,
    server: Launcher | None = None,
    only: Sequence[str] | None = None,
) -> tuple[SuiteRun, dict[str, str]]:
    """Apply `mutant` (None: the unmutated baseline) to a fresh scratch copy of the project and
    run the suite there (`only`: those node ids of it). The scratch copy is removed afterwards;
    the working tree is only read. Returns the run and, with `verify_shadowing`, where the
    packages were imported from."""
    root = Path(project_root).resolve()
    label = mutant.number if mutant else "baseline"
    with tempfile.TemporaryDirectory(prefix=f"onebit-mutant-{label}-") as tmp:
        scratch = make_scratch(root, Path(tmp) / "project", copied)
        modules: Sequence[str] = ()
        if verify_shadowing:
            modules = tuple(packages or packages_in(scratch))
            if not modules:  # check_shadowing says why
                check_shadowing(scratch, modules, python)
        if mutant is not None:
            complaint = apply_diff(scratch, mutant.diff)
            if complaint is not None:
                return SuiteRun(None, detail=f"the diff no longer applies: {complaint}"), {}
        run = run_suite(scratch, pytest_args, python=python, timeout_s=timeout_s,
                        breaks=mutant.breaks if mutant else (),
                        stop=stop if mutant else "never", server=server, modules=modules,
                        only=only)
        imported = _checked_imports(scratch, modules, run) if verify_shadowing else {}
        return run, imported


def _checked_imports(scratch: Path, modules: Sequence[str], run: SuiteRun) -> dict[str, str]:
    """The baseline's imported files, proved to come from its scratch copy (`ShadowError` if
    not, or if the run could not say: no verdict could be trusted)."""
    missing = [m for m in modules if m not in run.imported]
    if missing:
        raise ShadowError(f"the baseline run in {scratch} did not report where {missing} "
                          f"were imported from:\n{run.detail}")
    return _verify_shadowing(scratch, run.imported)


def _shadowed(root: Path, catalogues: Sequence[Catalogue]) -> tuple[str, ...]:
    """Every package some catalogue's copy shadows: the fork server must not preload them."""
    names: set[str] = set()
    for catalogue in catalogues:
        copied = catalogue.config.copied(root, catalogue.folder)
        names |= set(catalogue.config.packages or (
            n for n in copied if (root / n / "__init__.py").is_file() and n != "tests"))
    return tuple(sorted(names))


def run_catalogues(
    project_root: str | os.PathLike[str],
    catalogues: Sequence[Catalogue],
    *,
    jobs: int = 2,
    test_paths: Sequence[str] | None = None,
    only: Iterable[str] | None = None,
    python: str = sys.executable,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    stop: str = DEFAULT_STOP,
    fork: bool = True,
    on_report: Callable[[CatalogueReport], None] | None = None,
) -> list[CatalogueReport]:
    """Run every mutant of every catalogue against its suite (`test_paths` overrides each
    config's pytest arguments; `only` picks mutants by name in each), `jobs` at a time in one
    queue, next to one run of each unmutated copy. `on_report` sees each catalogue's report,
    in order, as soon as it and those before it are done.

    Raises `CatalogueError` for a malformed catalogue, `ShadowError` if a scratch copy would
    not shadow the installed package, and `ValueError` for bad arguments."""
    root = Path(project_root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"no project folder at {root}")
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    plans = []
    for catalogue in catalogues:
        config = catalogue.config
        mutants = select(catalogue.mutants, only) if only else list(catalogue.mutants)
        plans.append((catalogue, mutants, tuple(test_paths) if test_paths else config.tests,
                      config.copied(root, catalogue.folder)))
    reports: list[CatalogueReport] = []
    with ExitStack() as stack:
        server: Launcher | None = None
        if fork and can_fork():
            server = stack.enter_context(ForkPool(jobs, python, _shadowed(root, catalogues)))
        pool = stack.enter_context(PriorityPool(jobs))

        def one(plan, mutant: Mutant | None,
                only: Sequence[str] | None = None) -> tuple[SuiteRun, dict[str, str]]:
            catalogue, _, pytest_args, copied = plan
            return run_mutant(root, mutant, copied=copied, pytest_args=pytest_args,
                              packages=catalogue.config.packages, python=python,
                              timeout_s=timeout_s, verify_shadowing=mutant is None,
                              stop=stop, server=server, only=only)

        # Each baseline once its catalogue's mutants are done (the module's docstring says
        # why); it also proves, once per catalogue, that a scratch copy shadows the installed
        # package, before any verdict of that catalogue is reported.
        started = time.perf_counter()
        runs: list[list[Future]] = [[pool.submit(one, plan, m) for m in plan[1]]
                                    for plan in plans]
        baselines = [_baseline_after(pool, lambda only, plan=plan: one(plan, None, only),
                                     futures, targeted=stop != "never")
                     for plan, futures in zip(plans, runs, strict=True)]
        try:
            for plan, baseline_future, futures in zip(plans, baselines, runs, strict=True):
                catalogue, mutants, pytest_args, _ = plan
                baseline, imported = baseline_future.result()
                results = [MutantResult(m, verdict_of(m, f.result()[0]), f.result()[0])
                           for m, f in zip(mutants, futures, strict=True)]
                report = CatalogueReport(results, baseline, time.perf_counter() - started,
                                         jobs, pytest_args, imported, catalogue.config.name,
                                         catalogue.config.description, stop)
                reports.append(report)
                if on_report is not None:
                    on_report(report)
        except BaseException:
            for future in [*baselines, *(f for fs in runs for f in fs)]:
                future.cancel()
            raise
    return reports


def _baseline_after(pool: PriorityPool, baseline: Callable[[tuple[str, ...] | None], tuple],
                    futures: list[Future], *, targeted: bool) -> Future:
    """A future of the baseline's result, started on `pool` once every one of `futures` (the
    catalogue's mutant runs) is done, ahead of the mutant runs still waiting (so the
    catalogue's report need not wait for the others'): limited to the tests that failed in
    them when `targeted` and some did, else the whole suite."""
    outer: Future = Future()
    left = [len(futures)]
    lock = threading.Lock()

    def start() -> None:
        if any(f.cancelled() for f in futures):  # the whole run is being abandoned
            outer.cancel()
            return
        only = _failed_in(futures) if targeted else None
        try:
            inner = pool.submit(baseline, only or None, priority=0)
        except RuntimeError as error:  # the pool is closed: the run is being abandoned
            outer.set_exception(error)
            return
        inner.add_done_callback(lambda f: _pass_on(f, outer))

    def one_done(_: Future) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            start()

    if not futures:
        start()
    for future in futures:
        future.add_done_callback(one_done)
    return outer


def _failed_in(futures: list[Future]) -> tuple[str, ...]:
    """The node ids that failed in any judged run among `futures`, each once, in order."""
    failed: dict[str, None] = {}
    for future in futures:
        if future.cancelled() or future.exception() is not None:
            continue
        run = future.result()[0]
        if run.judged:
            failed.update(dict.fromkeys(run.failed_ids))
    return tuple(failed)


def _pass_on(inner: Future, outer: Future) -> None:
    if inner.cancelled():
        outer.cancel()
    elif inner.exception() is not None:
        outer.set_exception(inner.exception())
    else:
        outer.set_result(inner.result())


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
    stop: str = DEFAULT_STOP,
    fork: bool = True,
) -> CatalogueReport:
    """Run every mutant of the catalogue in `folder` (default `<project_root>/mutants/loop`)
    against its suite, `jobs` at a time, next to one run of the unmutated copy (see
    `run_catalogues`)."""
    root = Path(project_root).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"no project folder at {root}")
    if catalogue is None:
        catalogue = load_catalogue(root / "mutants" / "loop" if folder is None else folder, root)
    (report,) = run_catalogues(root, [catalogue], jobs=jobs, test_paths=test_paths, only=only,
                               python=python, timeout_s=timeout_s, stop=stop, fork=fork)
    return report
