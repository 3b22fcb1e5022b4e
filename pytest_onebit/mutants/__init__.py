"""Hand-written mutant catalogues and their runner: proof that each check fails on the bug it
exists for.

- `catalogue`: a folder of `NN-name.diff` files with a `catalogue.toml`; parsing and selection.
- `scratch`: scratch copies of the project, where mutants are applied (never the working tree).
- `suite_run`: one pytest run in a copy, read back from JUnit XML, failures credited to checks.
- `verdicts`: killed / off-target / survived / error, and the catalogue's report.
- `stop_plugin`: loaded into each mutant's run: the named checks' tests first, and the run
  ends once the verdict is known.
- `launch`, `forkserver`: a run as a fresh `python -m pytest`, or forked from a warm server.
- `jobs`: the runner's threads, which take a waiting baseline before any waiting mutant.
- `runner`: `run_catalogues`, every mutant of every catalogue next to its unmutated baseline,
  in one queue, a few at a time.
"""

from pytest_onebit.mutants.catalogue import (
    Catalogue,
    CatalogueConfig,
    CatalogueError,
    Mutant,
    find_catalogues,
    load_catalogue,
    parse_mutant,
    select,
)
from pytest_onebit.mutants.runner import run_catalogue, run_catalogues, run_mutant
from pytest_onebit.mutants.scratch import ShadowError, apply_diff, make_scratch, scratch_env
from pytest_onebit.mutants.suite_run import (
    STOP_MODES,
    SuiteRun,
    check_of_test,
    parse_junit,
    run_suite,
)
from pytest_onebit.mutants.verdicts import (
    ERROR,
    KILLED,
    OFF_TARGET,
    SURVIVED,
    CatalogueReport,
    MutantResult,
    verdict_of,
)

__all__ = [
    "ERROR",
    "KILLED",
    "OFF_TARGET",
    "STOP_MODES",
    "SURVIVED",
    "Catalogue",
    "CatalogueConfig",
    "CatalogueError",
    "CatalogueReport",
    "Mutant",
    "MutantResult",
    "ShadowError",
    "SuiteRun",
    "apply_diff",
    "check_of_test",
    "find_catalogues",
    "load_catalogue",
    "make_scratch",
    "parse_junit",
    "parse_mutant",
    "run_catalogue",
    "run_catalogues",
    "run_mutant",
    "run_suite",
    "scratch_env",
    "select",
    "verdict_of",
]
