"""The package's shape (docs/model.md "Layers"): imports flow one way, down the layers, with no
cycle and no project import hidden inside a function; nothing cites a document that does not
ship; the package data is where the code looks for it."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import networkx as nx
import pytest

from topofinder.cli.main import main
from topofinder.model.collectives import Collective

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "topofinder"

#: Bottom to top. A module may import from its own layer and the layers below it.
LAYERS = ["errors", "compute", "model", "families", "expansions", "scoring", "finder",
          "workload", "export", "cabling", "resilience", "execute", "batch", "api", "cli"]
#: All a command-line module may import from the project outside topofinder.cli: the API is
#: the one front door (docs/model.md "Layers"); no other public module is needed.
CLI_IMPORTS = {"topofinder.api", "topofinder.errors"}
#: Longest command-line module, in lines.
CLI_MAX_LINES = 300


def _modules() -> dict[str, Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) == 1:
        return LAYERS.index("api")          # the package facade re-exports the API lazily
    if parts[1] in ("__main__", "run"):         # `python -m topofinder[.run]` entry points
        return LAYERS.index("cli")
    return LAYERS.index(parts[1])


def _lazy_imports(tree: ast.Module):
    """(module, line) for every key of a module-level ``_LAZY`` table (the modules a package
    imports on first use of a name: PEP 562, topofinder.api) and every module-level
    ``lazy_module("...")`` (topofinder.compute.lazy): imports like any other."""
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if (isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, key.lineno
        call = node.value
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "lazy_module" and call.args
                and isinstance(call.args[0], ast.Constant)):
            yield call.args[0].value, node.lineno


def _imports(path: Path, module: str, known: set[str]):
    """(target module, line, inside a function?) for every project import in the file."""
    tree = ast.parse(path.read_text())
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for name, line in _lazy_imports(tree):
        if name.startswith("topofinder"):
            yield name, line, False
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] or [base]
            names = [n if n in known else base for n in names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            if not name.startswith("topofinder"):
                continue
            while name not in known and "." in name:
                name = name.rsplit(".", 1)[0]
            yield name, node.lineno, node.col_offset > 0


def _graph() -> tuple[nx.DiGraph, list[str]]:
    mods = _modules()
    known = set(mods)
    graph, nested = nx.DiGraph(), []
    graph.add_nodes_from(known)
    for module, path in mods.items():
        for target, line, inside in _imports(path, module, known):
            if target != module:
                graph.add_edge(module, target, line=line)
            if inside:
                nested.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    return graph, nested


def test_every_module_belongs_to_a_layer():
    for module in _modules():
        assert _layer(module) >= 0, module


def test_import_graph_has_no_cycle():
    graph, _ = _graph()
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import cycles: {cycles[:3]}"


def test_imports_go_down_the_layers():
    graph, _ = _graph()
    upward = [f"{a} -> {b} (line {d['line']})" for a, b, d in graph.edges(data=True)
              if _layer(b) > _layer(a)]
    assert not upward, "imports from a higher layer:\n" + "\n".join(upward)


def test_no_project_import_inside_a_function():
    _, nested = _graph()
    assert not nested, "function-level project imports:\n" + "\n".join(nested)


def _around_the_api(graph: nx.DiGraph) -> list[str]:
    """Imports by topofinder.cli modules (and ``python -m topofinder``) of project modules
    other than their own package and :data:`CLI_IMPORTS`."""
    cli = [m for m in graph if m.startswith("topofinder.cli") or m == "topofinder.__main__"]
    return [f"{a} -> {b} (line {graph.edges[a, b]['line']})" for a in cli for b in graph[a]
            if not b.startswith("topofinder.cli") and b not in CLI_IMPORTS]


def test_the_command_line_goes_through_the_api_only():
    graph, _ = _graph()
    assert graph.has_edge("topofinder.cli.main", "topofinder.api")
    assert not _around_the_api(graph), "cli imports around the API:\n" + "\n".join(
        _around_the_api(graph))


def test_the_api_check_sees_a_planted_import():
    graph = nx.DiGraph()
    graph.add_edge("topofinder.cli.score", "topofinder.api", line=3)
    graph.add_edge("topofinder.cli.score", "topofinder.cli.common", line=4)
    assert not _around_the_api(graph)
    graph.add_edge("topofinder.cli.score", "topofinder.finder.describe", line=5)
    assert _around_the_api(graph) == ["topofinder.cli.score -> topofinder.finder.describe "
                                      "(line 5)"]


def test_command_line_modules_are_short():
    long = {p.name: n for p in (PACKAGE / "cli").glob("*.py")
            if (n := len(p.read_text().splitlines())) > CLI_MAX_LINES}
    assert not long, long


def test_the_checker_sees_a_planted_cycle(tmp_path):
    """The graph builder is not vacuous: a function-level import that closes a cycle is seen."""
    pkg = tmp_path / "topofinder"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "model" / "__init__.py").write_text("")
    (pkg / "model" / "a.py").write_text("from topofinder.model.b import f\n")
    (pkg / "model" / "b.py").write_text("def f():\n    from topofinder.model import a\n")
    mods = {"topofinder.model.a": pkg / "model" / "a.py", "topofinder.model.b": pkg / "model" / "b.py"}
    edges = {(m, t, inside) for m, p in mods.items() for t, _, inside in _imports(p, m, set(mods))}
    assert edges == {("topofinder.model.a", "topofinder.model.b", False),
                     ("topofinder.model.b", "topofinder.model.a", True)}


def test_lazy_tables_are_imports(tmp_path):
    """A name table of modules loaded on first use is read as imports of its package: the
    API's lazy names count in the layer and cycle checks, and a planted upward one is seen."""
    graph, _ = _graph()
    assert graph.has_edge("topofinder.api", "topofinder.api.search")
    assert graph.has_edge("topofinder.api", "topofinder.model.topology")
    assert graph.has_edge("topofinder.api.search", "topofinder.resilience.robust")
    planted = tmp_path / "lazy.py"
    planted.write_text('_LAZY = {\n    "topofinder.cli.main": ("main",),\n}\n'
                       '_cli = lazy_module("topofinder.cli.search")\n')
    known = {"topofinder.model.lazy", "topofinder.cli.main", "topofinder.cli.search"}
    assert list(_imports(planted, "topofinder.model.lazy", known)) == [
        ("topofinder.cli.main", 2, False), ("topofinder.cli.search", 4, False)]


def test_the_api_names_all_resolve():
    """Every name the package exports lazily is where its table says (a typo in the table
    would surface only when a user first touched the name), and a submodule of the same name
    loaded first does not shadow it (``topofinder.api.search`` the module, ``api.search``
    the function)."""
    import importlib
    import types
    from topofinder import API_NAMES, api
    module = importlib.import_module("topofinder.api.search")    # around the API
    assert set(API_NAMES) <= set(api._HOME)
    for name in api._HOME:
        assert not isinstance(getattr(api, name), types.ModuleType), name
    assert api.search is module.search


def test_nothing_cites_a_document_that_does_not_ship():
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in PACKAGE.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if "DESIGN" in line]
    assert not offenders, offenders
    cited = {m for p in PACKAGE.rglob("*.py") for m in re.findall(r"docs/[\w-]+\.md",
                                                                  p.read_text())}
    missing = sorted(c for c in cited if not (ROOT / c).is_file())
    assert not missing, f"docstrings cite missing docs: {missing}"


def test_packaging_lists_every_package_and_ships_the_data():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {m for m, p in _modules().items() if p.name == "__init__.py"}
    assert packages <= set(conf["packages"]), packages - set(conf["packages"])
    assert conf["package-dir"]["topofinder.catalog_data"] == "catalog"
    assert "*.json" in conf["package-data"]["topofinder.catalog_data"]
    assert (ROOT / "catalog" / "Diamond.json").is_file()


@pytest.mark.parametrize("command", ["", "search", "score", "export", "bench", "catalog",
                                     "sweep", "catalog list", "catalog build",
                                     "catalog affine", "check", "run"])
def test_help_is_self_contained(command, capsys):
    """No help text sends the reader to a section of a document that is not there."""
    with pytest.raises(SystemExit) as done:
        main([*command.split(), "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "usage: topofinder" in out
    assert not re.search(r"DESIGN|§|Appendix|paper \d{3}", out), out


@pytest.mark.parametrize("layer", ["scoring", "export", "cabling"])
def test_no_function_over_80_lines(layer):
    """The scorers, the writers and the cabling stay in functions one can read whole."""
    long = [f"{p.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1})"
            for p in (PACKAGE / layer).rglob("*.py")
            for node in ast.walk(ast.parse(p.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > 80]
    assert not long, long


def _collective_literals(path: Path) -> list[str]:
    """``line value`` of every string constant (docstrings aside) that spells a collective."""
    tree = ast.parse(path.read_text())
    names = {c.value for c in Collective}
    docstrings = {id(body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                       ast.AsyncFunctionDef))
                  and (body := node.body) and isinstance(body[0], ast.Expr)}
    return [f"{node.lineno} {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names
            and id(node) not in docstrings]


def test_collective_names_come_from_the_enum():
    """Collective names are spelled once, in model/collectives.py; code says Collective.X."""
    home = PACKAGE / "model" / "collectives.py"
    found = [f"{path.relative_to(ROOT)}:{hit}" for path in sorted(PACKAGE.rglob("*.py"))
             if path != home for hit in _collective_literals(path)]
    assert found == []


def test_the_collective_check_sees_a_planted_literal(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('"""allgather in a docstring is prose."""\nKIND = "reduce-scatter"\n')
    assert _collective_literals(planted) == ["2 'reduce-scatter'"]
