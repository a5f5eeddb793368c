"""The import graph between connect_runtime's top-level parts stays a layered DAG.

Each part (``cluster``, ``task``, ``rest``, ...; modules such as ``errors`` count
as parts) may import only parts in layers below its own. That rules out cycles
and keeps the planes apart: the data plane (``task``) never reaches into the
control plane (``cluster``), and REST sees the control plane only through its
interfaces. docs/architecture.md draws the same picture; change both together.

Imports are read from the source (every ``import``, including function-level
and ``TYPE_CHECKING`` ones), with the ``package-dir`` mapping of pyproject.toml,
so nothing is imported to check it.
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOT = "<root>"  # connect_runtime/__init__.py: the connector author's API

# Top to bottom; a part may import from any lower layer, never from its own or above.
LAYERS: list[set[str]] = [
    {"cli"},
    {"worker"},  # process wiring
    {"rest", "tools", "connectors", "testing"},  # testing: the authors' test kit
    {"cluster"},  # control plane (driver)
    {"task"},  # data plane (executors)
    {"protocol", "storage"},
    {"kafka", "plugins", "plugin_path", "logs", "log_levels", "tempdirs", "build_info"},
    {"config"},  # parses and validates; calls security/ for every file or secret it needs
    # Per-record plugins, importable on executors. Converters sit above security/:
    # the Schema Registry converters read their TLS stores through it.
    {"converters"},
    {"security"},  # TLS, stores, JAAS, secrets: both planes import it, it imports neither
    {"java_properties"},  # the .properties text format config/ and security/ both read
    {"transforms"},  # per-record plugins; security/ reuses their Java regex
    {ROOT},
    {"api"},
    {"errors"},
]

# Narrower rules on top of the layers, as (importer, imported part) -> allowed modules.
ONLY: dict[tuple[str, str], set[str]] = {
    # REST is written against the herder's interface (the Herder protocol), so it
    # can be tested with fakes; it never reaches the control plane's internals.
    ("rest", "cluster"): {"connect_runtime.cluster.herder_api"},
}
# Bundled connectors are written as a user's would be: against the public API only.
PUBLIC_ONLY = {"connectors"}
# The test kit (connect_runtime.testing) runs in plain pytest, with no broker
# or Spark, and applies the task loop's own rules: beside the public API it may
# import only the pure modules that decide them.
PURE_ONLY: dict[str, set[str]] = {"testing": {
    "connect_runtime.task.boundaries", "connect_runtime.task.batches",
    "connect_runtime.storage.offsets.format", "connect_runtime.config.connector_config"}}

Edges = dict[str, dict[str, set[str]]]  # importer part -> imported part -> modules


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT


def _source_roots() -> dict[str, Path]:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    package_dir: dict[str, str] = pyproject["tool"]["setuptools"]["package-dir"]
    roots = {pkg: REPO / path for pkg, path in package_dir.items() if pkg}
    roots.setdefault("connect_runtime", REPO / "connect_runtime")
    return roots


def _imports(path: Path, module: str) -> list[str]:
    is_package = path.name == "__init__.py"
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                found.append(".".join([*base, *([node.module] if node.module else [])]))
            elif node.module:
                # `from connect_runtime import x` may name a submodule x.
                found += [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                          if node.module == "connect_runtime"]
    return found


def _parts(roots: dict[str, Path]) -> set[str]:
    """The top-level modules and packages of connect_runtime, wherever they live."""
    top = roots["connect_runtime"]
    parts = {p.stem if p.is_file() else p.name for p in top.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or any(p.glob("*.py"))}
    return parts | {pkg.split(".")[1] for pkg in roots if "." in pkg}


def import_edges(roots: dict[str, Path]) -> Edges:
    """Imports between parts of the packages at ``roots`` (package name -> folder)."""
    edges: Edges = defaultdict(lambda: defaultdict(set))
    known = _parts(roots)
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            module = ".".join([package, *parts])
            if any(module.startswith(other + ".") for other in roots
                   if other != package and other.startswith(package + ".")):
                continue  # mapped elsewhere by package-dir
            for target in _imports(path, module):
                if target.split(".")[0] != "connect_runtime":
                    continue
                source_part, target_part = _part(module), _part(target)
                if target_part not in known:  # `from connect_runtime import SourceTask`
                    target_part, target = ROOT, "connect_runtime"
                if source_part != target_part:
                    edges[source_part][target_part].add(target)
    return edges


def _modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module of the packages at ``roots``, by dotted name (a package by its own)."""
    found: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _group(module: str, path: Path) -> str:
    """The package a module belongs to (a package's ``__init__`` to itself)."""
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def module_edges(roots: dict[str, Path]) -> Edges:
    """Imports between modules of one package (``task.loop`` -> ``task.slot``), every
    import counted, function-level and ``TYPE_CHECKING`` ones too. ``from pkg
    import name`` counts as an import of ``pkg.name`` when that is a module."""
    modules = _modules(roots)
    edges: Edges = defaultdict(lambda: defaultdict(set))
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = module.split(".")
                    up = up[: len(up) - node.level + (1 if is_package else 0)]
                    base = ".".join([*up, *([node.module] if node.module else [])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                           for a in node.names]
            for target in targets:
                if (target in modules and target != module
                        and _group(target, modules[target]) == _group(module, path)):
                    edges[module][target].add(target)
    return edges


def find_cycles(edges: Edges) -> list[list[str]]:
    """Strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in edges.get(node, {}):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return cycles


def layer_violations(edges: Edges, layers: list[set[str]]) -> list[str]:
    level = {part: i for i, layer in enumerate(layers) for part in layer}
    problems = []
    for source, targets in sorted(edges.items()):
        for target, modules in sorted(targets.items()):
            if source not in level or target not in level:
                problems.append(f"{source} -> {target}: part missing from LAYERS")
            elif level[target] <= level[source]:
                problems.append(f"{source} imports {target} ({', '.join(sorted(modules))}), "
                                "which is not in a lower layer")
            allowed = ONLY.get((source, target))
            if allowed is not None and modules - allowed:
                problems.append(f"{source} may import from {target} only {sorted(allowed)}, "
                                f"not {sorted(modules - allowed)}")
            if source in PUBLIC_ONLY and target not in {ROOT}:
                problems.append(f"{source} must use the public API (`from connect_runtime "
                                f"import ...`), not {sorted(modules)}")
            pure = PURE_ONLY.get(source)
            if pure is not None and target not in {ROOT, "api", "errors"} and modules - pure:
                problems.append(f"{source} may import beside the API only the pure modules "
                                f"{sorted(pure)}, not {sorted(modules - pure)}")
    return problems


def test_no_cycles_between_top_level_parts() -> None:
    assert find_cycles(import_edges(_source_roots())) == []


def test_no_cycles_between_the_modules_of_a_package() -> None:
    """Inside ``task/``, ``cluster/`` and every other package too: a function-level
    import does not hide a cycle from this check."""
    assert find_cycles(module_edges(_source_roots())) == []


def test_parts_import_only_from_lower_layers() -> None:
    assert layer_violations(import_edges(_source_roots()), LAYERS) == []


def test_every_part_is_placed_in_a_layer() -> None:
    placed = set().union(*LAYERS)
    assert _parts(_source_roots()) - placed == set()


# The checker itself must be able to fail: feed it graphs that break the rules.

def _edges(*pairs: tuple[str, str]) -> Edges:
    edges: Edges = defaultdict(lambda: defaultdict(set))
    for source, target in pairs:
        edges[source][target].add(f"connect_runtime.{target}.x")
    return edges


def test_checker_finds_a_cycle_between_modules_hidden_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("def pick():\n    from pkg.impl import Impl\n")
    (package / "impl.py").write_text("from pkg.base import pick\n")
    (package / "other.py").write_text("from pkg import base\n")
    assert find_cycles(module_edges({"pkg": package})) == [["pkg.base", "pkg.impl"]]


def test_checker_finds_a_cycle() -> None:
    graph = _edges(("task", "storage"), ("storage", "kafka"), ("kafka", "task"), ("cli", "task"))
    assert find_cycles(graph) == [["kafka", "storage", "task"]]


@pytest.mark.parametrize(("pair", "complaint"), [
    (("task", "cluster"), "not in a lower layer"),
    (("rest", "worker"), "not in a lower layer"),
    (("storage", "protocol"), "not in a lower layer"),  # siblings stay independent
    (("security", "task"), "not in a lower layer"),  # both planes use it, it uses neither
    (("security", "config"), "not in a lower layer"),
    (("connectors", "api"), "public API"),
    (("testing", "kafka"), "only the pure modules"),  # the kit must run without a broker
    (("testing", "cluster"), "only the pure modules"),
])
def test_checker_flags_layer_breaches(pair: tuple[str, str], complaint: str) -> None:
    problems = layer_violations(_edges(pair), LAYERS)
    assert len(problems) == 1 and complaint in problems[0]


def test_checker_flags_rest_reaching_into_the_herder() -> None:
    graph: Edges = {"rest": {"cluster": {"connect_runtime.cluster.herder"}}}
    assert "only" in layer_violations(graph, LAYERS)[0]


def test_reader_sees_function_level_and_relative_imports(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    for part in ("task", "cluster", "storage"):
        (package / part).mkdir(parents=True)
        (package / part / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "task" / "loop.py").write_text(
        "def f():\n    from connect_runtime.cluster import herder\n"
        "from ..storage import offsets\n")
    edges = import_edges({"connect_runtime": package})
    assert set(edges["task"]) == {"cluster", "storage"}
