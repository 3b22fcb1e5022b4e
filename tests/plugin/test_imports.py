"""Imports only go down: no module of onebit or pytest_onebit imports, however indirectly, a
module that imports it back, and none imports from a floor above its own (FLOORS, below).

The graph is read from the source with `ast`, nothing is imported. An edge is every `import`
and `from ... import` anywhere in a module, inside functions too (a lazy import that goes up
is still an upward import), with relative imports resolved and `from package import name`
counted as importing the submodule `package.name` when there is one (else the package). Not
edges: imports under `if TYPE_CHECKING:` (they never run), modules named in strings
(`importlib.import_module`: the model registry's families, pytest_onebit's facade), and the
parent packages Python runs on the way to a submodule (every module would import its own
package's `__init__`, which is the facade on top of it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from pathlib import Path

ROOT = Path(__file__).parents[2]
PACKAGES = ("onebit", "pytest_onebit")

#: The floors, bottom first. A module may import its own floor and those below, never one
#: above. `name.*` is the module `name` and everything under it; a bare name is that module
#: alone; the most specific entry wins. A package that holds both a low part and the
#: composition on top of it is split by module (models, gguf, text).
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("leaves: the protocols, errors, results, sampling, the C ABI, the report model", (
        "onebit.errors", "onebit.protocols", "onebit.result", "onebit.sampling",
        "onebit.processors", "onebit.params", "onebit.wrapped", "onebit.grammar",
        "onebit.abi.*", "onebit.report", "onebit.progress")),
    ("the loop and its reference", (
        "onebit.fallback", "onebit.reference", "onebit.loop")),
    ("files, formats and kernels: the model cache, the test corpus, model files, blocks, "
     "Q4NX, ggml types, the compiled products", (
        "onebit.hub", "onebit.corpus", "onebit.models.errors", "onebit.models.files",
        "onebit.models.q4nx",
        "onebit.models.blocks", "onebit.models.kernels", "onebit.models.kernel_cache",
        # int8_ir and int8_source: the generated code int8_kernel compiles, split out of it
        "onebit.models.int8_kernel", "onebit.models.int8_ir", "onebit.models.int8_source",
        "onebit.models.q4nx_kernel", "onebit.gguf.errors",
        "onebit.gguf.types", "onebit.gguf.header")),
    ("backends: where the products run", (
        "onebit.backends.*",)),
    ("tokenizers and templates", (
        "onebit.text.*",)),
    ("the forward and its files: every family, the registry, GGUF reading", (
        "onebit.models.*", "onebit.gguf.*")),
    ("draft heads", (
        "onebit.heads.*",)),
    ("the batched engine: many sequences, each the loop on a slot of its own", (
        "onebit.batch.*",)),
    ("text through the loop, the tools, the server, training", (
        "onebit.text.generate", "onebit.text.answers", "onebit.text.load", "onebit.tools.*",
        "onebit.serve.*", "onebit.train.*")),
    ("onebit's facade", (
        "onebit",)),
    ("the harness's core: the contract core, assertions, doubles, MODULE:FUNC specs", (
        "pytest_onebit.contract.*", "pytest_onebit.doubles.*", "pytest_onebit.loader")),
    ("the contracts: loop, base, sampling, batch, served", (
        "pytest_onebit.loop.*", "pytest_onebit.base.*", "pytest_onebit.sampling.*",
        "pytest_onebit.batch.*", "pytest_onebit.serve.*")),
    ("what holds other loops: native, peers, the mutant runner, the device rig", (
        "pytest_onebit.native.*", "pytest_onebit.peers.*", "pytest_onebit.mutants.*",
        "pytest_onebit.device.*")),
    ("the pytest plugin and pytest_onebit's facade", (
        "pytest_onebit.plugin", "pytest_onebit.served_plugin", "pytest_onebit")),
    ("the command line", (
        "onebit.commands.*", "onebit.cli")),
]

#: Upward imports allowed for now, each with the reason it is pending: (importer, imported).
EXEMPT: frozenset[tuple[str, str]] = frozenset()


def package_modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of `packages` under `root`, by dotted name (a package by its own name)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """The ids of import nodes under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for inner in node.body:
                    skipped.update(id(n) for n in ast.walk(inner))
    return skipped


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest module of ours that `name` is or lies in, None for another package's."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> dict[str, int]:
    """The modules of ours that module `name` (at `path`) imports, each with the first line
    that does."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skipped = _type_checking_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(target: str | None, line: int) -> None:
        if target is not None and target != name:
            found.setdefault(target, line)

    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_known(alias.name, modules), node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                add(sub if sub in modules else _known(source, modules), node.lineno)
    return found


def import_graph(root: Path = ROOT, packages: Iterable[str] = PACKAGES,
                 ) -> tuple[dict[str, dict[str, int]], dict[str, Path]]:
    """Module -> {imported module: line}, and module -> path, for every module of
    `packages`."""
    modules = package_modules(root, packages)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}, modules


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One import circle per strongly connected component that has one, as the path
    `[a, b, ..., a]` (Tarjan's algorithm, then the shortest way back to a)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_way_back(graph, c[0], set(c)) for c in components)


def _way_back(graph: dict[str, dict[str, int]], start: str, members: set[str]) -> list[str]:
    """The shortest path from `start` back to it through `members` (breadth first)."""
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v]):
                if w == start:
                    return [*paths[v], start]
                if w in members and w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"{start} is in a cycle but no path leads back to it")


def floor_of(module: str, floors: Sequence[tuple[str, Sequence[str]]] = FLOORS) -> int | None:
    """The index of `module`'s floor: an exact entry first, else the longest `name.*` it is
    or lies under; None when no floor holds it."""
    best, best_len = None, -1
    for i, (_, entries) in enumerate(floors):
        for entry in entries:
            if entry == module:
                return i
            if entry.endswith(".*"):
                stem = entry[:-2]
                if (module == stem or module.startswith(stem + ".")) and len(stem) > best_len:
                    best, best_len = i, len(stem)
    return best


def upward_imports(graph: dict[str, dict[str, int]], paths: dict[str, Path],
                   root: Path = ROOT, floors: Sequence[tuple[str, Sequence[str]]] = FLOORS,
                   exempt: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """Every import from a module to one on a higher floor, as `file:line: a -> b (floor ->
    floor)`, and every module no floor holds."""
    found = []
    for module in sorted(graph):
        mine = floor_of(module, floors)
        if mine is None:
            found.append(f"{module}: on no floor (add it to FLOORS)")
            continue
        for target, line in sorted(graph[module].items()):
            theirs = floor_of(target, floors)
            if theirs is not None and theirs > mine and (module, target) not in exempt:
                where = paths[module].relative_to(root).as_posix()
                found.append(f"{where}:{line}: {module} -> {target} "
                             f"({floors[mine][0].split(':')[0]} -> "
                             f"{floors[theirs][0].split(':')[0]})")
    return found


def _shown(circle: list[str], graph: dict[str, dict[str, int]]) -> str:
    steps = [f"{a} -> {b} (line {graph[a][b]})" for a, b in zip(circle, circle[1:], strict=False)]
    return " ; ".join(steps)


def test_no_import_circles():
    """No module of onebit or pytest_onebit imports itself back through others: the import
    graph read from the source (lazy imports included) has no cycle. A failure names each
    circle, edge by edge with the importing line."""
    graph, _ = import_graph()
    found = cycles(graph)
    assert not found, "import circles:\n" + "\n".join(_shown(c, graph) for c in found)


def test_no_import_goes_up_a_floor():
    """Every module of both packages is on a floor of FLOORS, and none imports a module on a
    higher floor (lazy imports included; `if TYPE_CHECKING:` imports exempt). A failure names
    the file, the line and both floors."""
    graph, paths = import_graph()
    found = upward_imports(graph, paths, exempt=EXEMPT)
    assert not found, "imports against the floor order:\n" + "\n".join(found)


def test_the_checker_sees_a_circle_and_an_upward_import(tmp_path):
    """The two checks above can fail: in a made-up package with a circle through a lazy,
    relative import and a lazy upward import, both are reported; a `from pkg import sub` is an
    import of the submodule; an upward import under `if TYPE_CHECKING:` is not reported."""
    pkg = tmp_path / "pkg"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pkg.low import b\n"
        "if TYPE_CHECKING:\n"
        "    from pkg import high\n")
    (pkg / "low" / "b.py").write_text("def f():\n    from . import a\n    return a\n")
    (pkg / "low" / "c.py").write_text("def g():\n    import pkg.high.top\n")
    (pkg / "high").mkdir()
    (pkg / "high" / "__init__.py").write_text("")
    (pkg / "high" / "top.py").write_text("from ..low.a import b\n")
    graph, paths = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.low.a"] == {"pkg.low.b": 2}
    assert graph["pkg.high.top"] == {"pkg.low.a": 1}
    assert cycles(graph) == [["pkg.low.a", "pkg.low.b", "pkg.low.a"]]
    floors = [("low", ("pkg.low.*",)), ("high", ("pkg.high.*", "pkg"))]
    assert floor_of("pkg", floors) == 1 and floor_of("pkg.low", floors) == 0
    assert upward_imports(graph, paths, tmp_path, floors) == [
        "pkg/low/c.py:2: pkg.low.c -> pkg.high.top (low -> high)"]
    unplaced = upward_imports(graph, paths, tmp_path, floors[:1])
    assert unplaced[0] == "pkg: on no floor (add it to FLOORS)"
    exempt = frozenset({("pkg.low.c", "pkg.high.top")})
    assert not upward_imports(graph, paths, tmp_path, floors, exempt)
