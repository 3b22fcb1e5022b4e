"""numba's on-disk cache for the compiled kernels: float, packed, integer, and the stack.

Those kernels are made at run time (closures over LLVM intrinsics, some from generated source),
so numba's own cache cannot hold them: it finds a function by its file and line, and every
variant of a closure (each block kind, lanes form, serial or parallel) shares both. Here each
variant gets a name of its own, `<name>_<digest>`, where the digest covers

- the variant (the builder's arguments: kinds, form, parallel, ...);
- the source of every module a kernel is generated from (SOURCES), numba's, llvmlite's and
  Python's versions: numba sees no change in a file a cached function calls into, so any
  edit to these files gives every kernel a new name, never a stale one;

and `OnebitLocator` puts them under `$ONEBIT_KERNEL_CACHE` (default `$ONEBIT_HOME/kernels`),
in a folder of their own for this version of the sources (the sources' digest, 16 hex digits),
with the digest as the source stamp. Every edit makes a new folder, so a folder no process has
used for KEEP_DAYS days is removed when the next one is made ready: the cache holds the
versions in use, not every version there ever was. numba's index adds the signature and the
CPU (its name and features): a cache copied to another machine compiles again. What is loaded
is the machine code a compile made, so the bits are those of a compile
(tests/forward/test_kernel_cache.py).

A variant is compiled once per machine, not once per process: a process about to compile one
takes a lock on the variant's file in the folder (`<name>.lock`, fcntl's), and a process that
wanted the same variant meanwhile waits for it and then loads what the first one stored. Two
pytest workers, or a server's processes, starting on an empty cache would otherwise each spend
the same 15-40 s compiling the same stack.

`ONEBIT_KERNEL_CACHE=0` turns the cache off (every process compiles, as before). It is also off
where numba is told to use other locators (`NUMBA_CACHE_LOCATOR_CLASSES`) or numba's cache
machinery is not as this module expects, and for a function whose module no later process
could import (one made at run time: it would be stored under a real kernel's name and break
that kernel's next load).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import CodeType

CACHE_ENV = "ONEBIT_KERNEL_CACHE"
OFF = ("0", "off", "false", "no")
# every module a cached kernel is made from or takes constants from
SOURCES = ("int8_kernel.py", "int8_ir.py", "int8_source.py", "fused.py", "kernels.py",
           "q4nx_kernel.py", "q4nx.py", "blocks.py", "kernel_cache.py", "vexp.py",
           "../heads/eagle_kernel.py")
MARK = "_onebit_kernel_cache"  # set on a function this module names and places
KEEP_DAYS = 14  # a version's folder unused this long is removed
VERSION_DIR = re.compile(r"[0-9a-f]{16}")
LOCK_WAIT_S = 900.0  # a compile held longer than this by another process is done here too
LOCK_POLL_S = 0.02
_held: set[str] = set()  # the compile locks this process holds (under numba's compiler lock)


def cache_dir() -> Path | None:
    """Where the kernels are cached, or None when the cache is off."""
    wanted = os.environ.get(CACHE_ENV, "").strip()
    if wanted.lower() in OFF:
        return None
    if wanted:
        return Path(wanted).expanduser()
    from onebit.hub import onebit_home

    return onebit_home() / "kernels"


@cache
def _sources_digest() -> str:
    import llvmlite
    import numba

    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in SOURCES:
        digest.update(name.encode() + b"\0" + (here / name).read_bytes())
    digest.update(f"{numba.__version__} {llvmlite.__version__} {sys.version}".encode())
    return digest.hexdigest()


def variant_name(name: str, variant: tuple) -> str:
    """`name` made unique to this variant and to this version of the kernel sources."""
    digest = hashlib.sha256(f"{_sources_digest()} {name} {variant!r}".encode()).hexdigest()
    return f"{name}_{digest[:20]}"


@cache
def _locator_installed() -> bool:
    """Put `OnebitLocator` first in numba's locators (once); False where that is not possible."""
    try:
        from numba.core import caching, config
    except ImportError:
        return False
    impl = getattr(caching, "CacheImpl", None)  # numba 0.68: CacheImpl; older: _CacheImpl
    impl = impl or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    base = getattr(caching, "_CacheLocator", None)
    if (not isinstance(classes, list) or base is None
            or getattr(config, "CACHE_LOCATOR_CLASSES", "")
            or not hasattr(caching, "FunctionCache")):
        return False

    class OnebitLocator(base):
        """numba's cache locator for the functions `jit` marked: one directory, the sources'
        digest as their stamp (their names already change with every edit)."""

        def __init__(self, py_func, path: Path) -> None:
            self._path = str(path)

        def get_cache_path(self) -> str:
            return self._path

        def get_source_stamp(self) -> str:
            return _sources_digest()

        def get_disambiguator(self) -> str:
            return "onebit"

        @classmethod
        def from_function(cls, py_func, py_file):
            path = getattr(py_func, MARK, None)
            return cls(py_func, path) if path is not None else None

    classes.insert(0, OnebitLocator)
    return True


def jit(func: Callable, variant: tuple, **options) -> Callable:
    """`numba.njit(**options)(func)`, cached on disk as this variant (see the module
    docstring) when the cache is on."""
    from numba import njit

    where = cache_dir()
    folder = None if where is None else _prepared(where)
    if folder is None or not _locator_installed() or not _importable(func):
        return njit(**options)(func)
    func.__qualname__ = func.__name__ = variant_name(func.__name__, variant)
    setattr(func, MARK, folder)
    dispatcher = njit(cache=True, **options)(func)
    dispatcher._cache = _variant_cache()(func)  # nothing is compiled yet: njit is lazy
    _compile_once_per_machine(dispatcher, folder / f"{func.__name__}.lock")
    return dispatcher


def _importable(func: Callable) -> bool:
    """Whether a process that loads `func` from the cache can import the module it names:
    numba rebuilds a cached kernel's globals from that module, so a kernel defined in a
    module made at run time (benchmarks/stack_parts.py's patched copies of fused.py, say)
    would be stored, then fail to load in every later process that shares its name (the
    real stack's). Such a function is compiled, never cached."""
    import importlib.util

    name = getattr(func, "__module__", None)
    if not name:
        return False
    if name == "__main__":  # every process has one: numba caches a script's kernels too
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: in sys.modules with no spec
        return False


def _compile_once_per_machine(dispatcher, lock: Path) -> None:
    """Make `dispatcher.compile` (numba's: look in memory, then on disk, else compile and store)
    run under the variant's machine-wide lock. numba's compiler lock is taken first, so the
    threads of one process queue there and only one of them waits on the file."""
    from numba.core.compiler_lock import global_compiler_lock

    compile_here = dispatcher.compile

    def compile(sig):
        with global_compiler_lock, _machine_lock(lock):
            return compile_here(sig)

    dispatcher.compile = compile  # numba calls it by attribute, from Python and from typing


@contextmanager
def _machine_lock(path: Path) -> Iterator[None]:
    """Hold the exclusive fcntl lock on `path` (made if missing) while the block runs. Never an
    error: without fcntl (Windows), on a file that cannot be opened or locked, or after
    LOCK_WAIT_S of waiting (a process stopped while it compiled), the block runs unlocked and
    at worst compiles what another process is compiling, as without the lock. Re-entered in
    this process (a kernel compiled while compiling itself), the lock is already held."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    key = str(path)
    if key in _held:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(LOCK_POLL_S)
            except OSError:
                break
        _held.add(key)
        try:
            yield
        finally:
            _held.discard(key)
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@cache
def _prepared(where: Path) -> Path | None:
    """The folder under `where` for this version's kernels, made and marked as in use (its
    time set to now), after the folders of other versions unused for KEEP_DAYS are removed;
    None when it cannot be written, and the kernels are then compiled in every process, as
    without the cache, rather than failing."""
    folder = where / _sources_digest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        os.utime(folder)
    except OSError:
        return None
    _prune(where, keep=folder)
    return folder


def _prune(where: Path, keep: Path) -> None:
    """Remove what under `where` no process has touched for KEEP_DAYS: other versions'
    folders, and the files an earlier onebit kept there directly. Nothing else is touched."""
    cutoff = time.time() - KEEP_DAYS * 86400
    try:
        entries = list(where.iterdir())
    except OSError:
        return
    for entry in entries:
        try:
            if entry == keep or entry.stat().st_mtime > cutoff:
                continue
            if entry.is_dir() and VERSION_DIR.fullmatch(entry.name):
                shutil.rmtree(entry, ignore_errors=True)
            elif entry.is_file() and entry.suffix in (".nbi", ".nbc"):
                entry.unlink(missing_ok=True)
        except OSError:
            continue


@cache
def _variant_cache():
    from numba.core.caching import FunctionCache

    class VariantCache(FunctionCache):
        """numba's function cache, an entry keyed by signature, CPU and code object, but not by
        the closure's cells as numba keys it: a closure over other kernels pickles them
        differently in every process (a dispatcher's pickle carries its id), so it would never
        be found again. The cells are fixed by the variant and the sources, which the
        function's name already carries."""

        def _index_key(self, sig, codegen):
            # the whole code object (constants, names, nested code), not only its bytecode:
            # a copy of a kernel's source with one constant changed is another kernel
            code = hashlib.sha256(marshal.dumps(_placeless(self._py_func.__code__)))
            return (sig, codegen.magic_tuple(), code.hexdigest())

    return VariantCache


def _placeless(code: CodeType) -> CodeType:
    """`code` and its nested code objects with the file name blanked: the same kernel source
    read from another copy of onebit (a mutant catalogue's scratch copy, a second checkout)
    compiles to the same machine code, so it is the same entry. Lines are kept: they are in
    the source the digest covers anyway."""
    consts = tuple(_placeless(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return code.replace(co_filename="", co_consts=consts)
