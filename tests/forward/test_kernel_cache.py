"""The on-disk kernel cache (onebit/models/kernel_cache.py): a kernel compiled in one process is
loaded, not compiled, by the next, with the same results; its name changes with the variant and
with the sources; and it never breaks a run (off, or an unwritable place, compiles as before)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

from onebit.models import kernel_cache  # noqa: E402

# A parallel closure over another cached kernel and over the thread-count intrinsic (numba keys
# a closure by its cells' pickle, which differs from process to process for these): the
# shapes of the integer kernel's wrappers, at a second's compile.
CHILD = textwrap.dedent("""
    import numpy as np
    from numba import prange
    from onebit.models import int8_kernel, kernel_cache

    def make(factor):  # the kernels as the integer kernel makes them: closures over others
        threads = int8_kernel.threads_kernel()

        def scale(x):
            return x * factor

        scale = kernel_cache.jit(scale, ("test", factor), nogil=True)

        def total(xs):
            out = np.zeros(xs.shape[0])
            n = threads()
            for i in prange(xs.shape[0]):
                out[i] = scale(xs[i]) + n - n
            return out.sum()

        return kernel_cache.jit(total, ("test", factor), parallel=True)

    total = make(0.5)
    value = total(np.arange(1000.0))
    stats = total.stats
    print(repr(value), sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
""")


def stored(where: Path) -> list[str]:
    """The files under the cache folder `where`, as paths relative to it."""
    return sorted(str(p.relative_to(where)) for p in where.rglob("*") if p.is_file())


def child(env: dict[str, str], code: str = CHILD) -> tuple[float, int, int]:
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    value, hits, misses = done.stdout.split()
    return float(value), int(hits), int(misses)


def test_second_process_loads_what_the_first_compiled(tmp_path):
    """The first process compiles and stores the kernels; the second finds them (a cache hit,
    no miss), adds no file, and computes the same value."""
    env = {"ONEBIT_KERNEL_CACHE": str(tmp_path)}
    first = child(env)
    files = stored(tmp_path)
    assert first[1:] == (0, 1)
    assert any(name.endswith(".nbi") for name in files)
    second = child(env)
    assert second == (first[0], 1, 0)
    assert stored(tmp_path) == files
    assert first[0] == np.arange(1000.0).sum() * 0.5


@pytest.mark.slow  # compiles in subprocesses with caches of their own (8 s)
def test_a_copy_of_the_sources_elsewhere_loads_what_the_first_compiled(tmp_path):
    """The same kernel module read from another place (a mutant catalogue's scratch copy, a
    second checkout) finds the kernels the first place compiled: the entry is keyed by the
    code, not by the file it was read from. A copy with the kernel's code changed is compiled."""
    env = {"ONEBIT_KERNEL_CACHE": str(tmp_path / "cache")}
    places = []
    for name, source in (("first", CHILD), ("copy", CHILD), ("changed", CHILD.replace(
            "+ n - n", "+ n - n + 0.0"))):
        place = tmp_path / name
        place.mkdir()
        (place / "onebit_cache_probe.py").write_text(source)
        places.append(place)
    runs = [child({**env, "PYTHONPATH": os.pathsep.join([str(p), str(Path.cwd())])},
                  code="import onebit_cache_probe") for p in places]
    assert runs[0][1:] == (0, 1)
    assert runs[1] == (runs[0][0], 1, 0)
    assert runs[2][1:] == (0, 1)


# CHILD, saying "ready" on stderr once everything but the call (and so the compile) is done
READY_CHILD = CHILD.replace(
    "total = make(0.5)\n",
    "total = make(0.5)\nimport sys\nprint('ready', file=sys.stderr, flush=True)\n")


@pytest.mark.slow  # compiles in subprocesses with a cache of their own (6 s)
def test_a_variant_is_compiled_once_however_many_processes_want_it(tmp_path):
    """Two processes that want the same variant at once on an empty cache compile it once: while
    another holds the variant's lock both wait (neither finishes), and once it is free one
    compiles and stores it (a miss), the other loads what that one stored (a hit, no miss);
    both compute the same value."""
    import time

    env = {**os.environ, "ONEBIT_KERNEL_CACHE": str(tmp_path)}
    folder = tmp_path / kernel_cache._sources_digest()[:16]
    folder.mkdir()
    lock = folder / f"{kernel_cache.variant_name('total', ('test', 0.5))}.lock"
    with kernel_cache._machine_lock(lock):
        children = [subprocess.Popen([sys.executable, "-c", READY_CHILD], env=env, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    for _ in range(2)]
        for process in children:
            lines = []
            while not lines or lines[-1] not in ("ready\n", ""):
                lines.append(process.stderr.readline())
            assert lines[-1] == "ready\n", "".join(lines)
        time.sleep(0.5)  # the lock is the first thing a compile takes
        assert [process.poll() for process in children] == [None, None]
    done = [process.communicate(timeout=600) for process in children]
    assert [process.returncode for process in children] == [0, 0], [err for _, err in done]
    results = [out.split() for out, _ in done]
    assert {float(value) for value, _, _ in results} == {np.arange(1000.0).sum() * 0.5}
    assert sorted((int(hits), int(misses)) for _, hits, misses in results) == [(0, 1), (1, 0)]


# The float and packed kernels (kernels.py, q4nx_kernel.py), each serial and parallel: their
# results' bytes, and numba's hits and misses over every dispatcher they are made of.
FLOAT_CHILD = textwrap.dedent("""
    import hashlib
    import numpy as np
    from onebit.models import kernels, q4nx, q4nx_kernel

    rng = np.random.default_rng(0)
    weight = rng.standard_normal((96, 256)).astype(np.float32)
    rows = rng.standard_normal((5, 256)).astype(np.float32)
    digest = hashlib.sha256()
    for parallel in (False, True):
        out = np.empty((5, 96), np.float32)
        kernels._tiled_kernel(parallel)(weight, rows, out)
        digest.update(out.tobytes())
        kernels._numba_kernel(parallel)(weight, rows, out)
        digest.update(out.tobytes())
        for convention in ("unsigned", "signed"):
            blocks = q4nx.quantize(weight.astype(np.float64), convention=convention)
            packed = q4nx_kernel.PackedWeight.from_blocks(blocks, weight.shape, convention)
            digest.update(q4nx_kernel.packed_rows(packed, rows, parallel=parallel).tobytes())
    made = [*kernels._tiled_kernels.values(), *kernels._numba_kernels.values(),
            *q4nx_kernel._kernels.values()]
    hits = sum(sum(k.stats.cache_hits.values()) for k in made)
    misses = sum(sum(k.stats.cache_misses.values()) for k in made)
    print(digest.hexdigest(), hits, misses)
""")


# Compiles every float and packed kernel twice over into an empty cache (20 s on two cores):
# the slow step. README line 2 keeps the round trip on one kernel (the two tests above).
@pytest.mark.slow
def test_float_and_packed_kernels_load_from_the_cache(tmp_path):
    """The tiled and the simple float kernel and the packed Q4NX kernel (both conventions,
    serial and parallel, with the blocks they call): a second process loads every one of them
    (hits only, no compile), stores nothing new, and its products are the first's, byte for
    byte."""
    env = {**os.environ, "ONEBIT_KERNEL_CACHE": str(tmp_path)}

    def run():
        done = subprocess.run([sys.executable, "-c", FLOAT_CHILD], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        digest, hits, misses = done.stdout.split()
        return digest, int(hits), int(misses), stored(tmp_path)

    first, second = run(), run()
    assert first[1] == 0 and first[2] >= 12  # 2 tiled, 2 simple, 4 packed, and their parts
    # a loaded kernel carries the code of the kernels it calls: those are never asked for
    assert second[0] == first[0] and second[1] >= 9 and second[2] == 0
    assert second[3] == first[3]


@pytest.mark.slow  # compiles in subprocesses with the cache off (5 s)
def test_off_and_unwritable_compile_as_before(tmp_path):
    """`ONEBIT_KERNEL_CACHE=0`, or a place that cannot be written, compiles in the process
    (no hit: numba counts a compile without a cache as a miss) and stores nothing."""
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    for where in ("0", str(blocked / "kernels")):
        assert child({"ONEBIT_KERNEL_CACHE": where}) == (np.arange(1000.0).sum() * 0.5, 0, 1)
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


# A kernel defined in a module made at run time, as benchmarks/stack_parts.py makes its
# patched copies of fused.py: the same function, so the same name and numba key, as an
# importable module's kernel.
RUNTIME_MODULE = textwrap.dedent("""
    import sys, types
    from onebit.models import kernel_cache

    source = "def double(x):\\n    return x * 2\\n"
    module = types.ModuleType("made_at_run_time")
    sys.modules[module.__name__] = module
    exec(source, module.__dict__)
    double = kernel_cache.jit(module.double, ("test-runtime",))
    print(double(21), sum(double.stats.cache_hits.values()))
""")


@pytest.mark.slow  # compiles in subprocesses with a cache of their own (4 s)
def test_a_kernel_from_a_module_made_at_run_time_is_never_stored(tmp_path):
    """numba rebuilds a cached kernel's globals by importing its module, so a kernel from a
    module no later process can import would be stored under its name and then break that
    name's next load (it did: a real stack failed to load after stack_parts.py ran). Such a
    kernel is compiled and runs, and nothing is stored."""
    env = {**os.environ, "ONEBIT_KERNEL_CACHE": str(tmp_path / "kernels")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", RUNTIME_MODULE], env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["42", "0"]
    assert not [p for p in stored(tmp_path / "kernels") if "double" in p]


def test_a_version_keeps_its_own_folder_and_old_ones_go(tmp_path, monkeypatch):
    """Kernels are stored in a folder of this version of the sources (their digest). Making it
    ready removes what no process has touched for KEEP_DAYS: another version's folder, and
    the files an earlier onebit kept at the top; a recent other version, and files that are
    not kernels, stay."""
    import time

    monkeypatch.setattr(kernel_cache, "_sources_digest", lambda: "ab" * 32)
    old = time.time() - (kernel_cache.KEEP_DAYS + 1) * 86400
    stale, recent = tmp_path / ("0" * 16), tmp_path / ("1" * 16)
    for folder in (stale, recent):
        folder.mkdir()
        (folder / "stack_x-onebit.py311.nbi").write_bytes(b"index")
    flat, note = tmp_path / "stack_y-onebit.py311.nbc", tmp_path / "notes.txt"
    flat.write_bytes(b"code")
    note.write_text("mine")
    for path in (stale / "stack_x-onebit.py311.nbi", stale, flat, note):
        os.utime(path, (old, old))
    folder = kernel_cache._prepared.__wrapped__(tmp_path)
    assert folder == tmp_path / ("ab" * 8) and folder.is_dir()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [folder.name, recent.name, note.name])


def test_names_follow_the_variant_and_the_sources(monkeypatch):
    """A kernel's cached name differs between variants and between versions of the kernel
    sources, and is the same for the same both: a stale kernel is never found."""
    a = kernel_cache.variant_name("stack", (("q4_1",) * 4, True, "vnni"))
    assert a == kernel_cache.variant_name("stack", (("q4_1",) * 4, True, "vnni"))
    assert a != kernel_cache.variant_name("stack", (("q4_1",) * 4, False, "vnni"))
    assert a != kernel_cache.variant_name("stack", (("q4_0",) * 4, True, "vnni"))
    assert a != kernel_cache.variant_name("product", (("q4_1",) * 4, True, "vnni"))
    monkeypatch.setattr(kernel_cache, "_sources_digest", lambda: "an edited fused.py")
    assert a != kernel_cache.variant_name("stack", (("q4_1",) * 4, True, "vnni"))


def test_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    """`$ONEBIT_KERNEL_CACHE` names the place; unset, it is `$ONEBIT_HOME/kernels`; 0 / off
    turn it off."""
    monkeypatch.delenv("ONEBIT_KERNEL_CACHE", raising=False)
    monkeypatch.setenv("ONEBIT_HOME", str(tmp_path))
    assert kernel_cache.cache_dir() == tmp_path / "kernels"
    monkeypatch.setenv("ONEBIT_KERNEL_CACHE", str(tmp_path / "k"))
    assert kernel_cache.cache_dir() == tmp_path / "k"
    for off in ("0", "off", "OFF", "no"):
        monkeypatch.setenv("ONEBIT_KERNEL_CACHE", off)
        assert kernel_cache.cache_dir() is None


@pytest.mark.slow
def test_compiled_stack_from_the_cache_gives_the_same_bits(tmp_path):
    """On a fabricated Q4_1 GGUF, a step and a verify through the compiled stack in a process
    that loads every kernel from the cache give the logits, bit for bit, of the process that
    compiled them, and the second process stores nothing new."""
    from onebit.gguf.fabricate import fabricate_gguf

    model = tmp_path / "llama.gguf"
    fabricate_gguf(model, "llama", matrix_type="Q4_1")
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from onebit.gguf import load_gguf
        m = load_gguf({str(model)!r}, kernel="int8")
        assert m._fused is not None
        out = [m.step(1, 0), m.verify([2, 3, 4, 5, 6], 1)]
        np.save(sys.argv[1], np.concatenate([o.reshape(-1) for o in out]))
    """)
    cache = tmp_path / "kernels"
    env = {**os.environ, "ONEBIT_KERNEL_CACHE": str(cache)}
    saved = []
    for run in ("compiled", "loaded"):
        out = tmp_path / f"{run}.npy"
        done = subprocess.run([sys.executable, "-c", script, str(out)], env=env,
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        saved.append(stored(Path(cache)))
    assert saved[0] == saved[1] and any("stack" in name for name in saved[0])
    assert np.array_equal(np.load(tmp_path / "compiled.npy"), np.load(tmp_path / "loaded.npy"))


def test_every_module_a_kernel_is_generated_from_is_in_the_sources():
    """The modules that the cached kernels' code comes from (every module of onebit that
    caches a kernel, and the modules of onebit/models those import) are all in SOURCES: an
    edit to a module left out would load the kernels it replaced."""
    import ast

    models = Path(kernel_cache.__file__).parent
    package = models.parent
    kernels = {os.path.relpath(path, models) for path in package.rglob("*.py")
               if path.name != "kernel_cache.py"
               and "kernel_cache.jit(" in path.read_text(encoding="utf-8")}
    assert {"int8_kernel.py", "fused.py", "kernels.py", "q4nx_kernel.py",
            os.path.join("..", "heads", "eagle_kernel.py")} <= kernels
    imported = set()
    for name in kernels:
        for node in ast.walk(ast.parse((models / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                if parts[:2] == ["onebit", "models"] and len(parts) == 3:
                    imported.add(parts[2] + ".py")
                if node.module in ("onebit.models", "") or node.level:
                    imported |= {a.name + ".py" for a in node.names
                                 if (models / (a.name + ".py")).is_file()}
    generated_from = kernels | {m for m in imported if (models / m).is_file()}
    missing = generated_from - set(kernel_cache.SOURCES)
    assert not missing, f"kernel_cache.SOURCES leaves out {sorted(missing)}"
