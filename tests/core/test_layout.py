"""The layout's rules, read from the code: one core, thin wings (docs/architecture.md).

Rationale: docs/design-notes.md, "tests/core/test_layout.py".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import ROOT

PACKAGES = ("gateway", "indexes")
WINGS = ("gateway.volcengine", "gateway.agent", "gateway.dify", "gateway.mcp", "gateway.documents")
# the operator's CLI, the console (owners and admins), content sync, evaluation, the server, the command line
OUTER = ("gateway.ops", "gateway.console", "gateway.sync", "gateway.evaluation", "gateway.serve", "gateway.cli")
MAX_LINES = 400
# Lowest first: a module imports only from its own layer or below (docs/architecture.md).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("indexes",),
    ("gateway.core",),
    WINGS,
    ("gateway.ops", "gateway.sync", "gateway.evaluation"),
    ("gateway.console",),
    ("gateway.serve",),
    ("gateway.cli",),
)


def modules() -> dict[str, Path]:
    """Dotted name → file of every project module (a package is its __init__.py)."""
    out: dict[str, Path] = {}
    for pkg in PACKAGES:
        for py in (ROOT / pkg).rglob("*.py"):
            parts = py.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = py
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The longest known module that `name` (a module or a name inside one) lies in."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (`from a import b` counts a.b when that is a module)."""
    tree = ast.parse(path.read_text("utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            found = _resolve(t, known)
            if found is not None and found != name:
                out.add(found)
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def _within(module: str, prefixes: tuple[str, ...]) -> str | None:
    return next((p for p in prefixes if module == p or module.startswith(p + ".")), None)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_the_imports() -> None:
    g = graph()
    assert "gateway.core.scope" in g["gateway.volcengine.handler"]
    assert "gateway.core.retrieve" in g["gateway.agent.tools.read"]
    assert "gateway.serve.server" in g["gateway.cli"]  # a lazy import inside a function counts
    assert "gateway.agent.feedback.github" in g["gateway.agent.tools.clients"]


def test_no_import_cycle_among_project_modules() -> None:
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def layer(module: str) -> int:
    """The index in LAYERS of `module`'s layer; the bare `gateway` package (its version) is 0."""
    if module == "gateway":
        return 0
    return next(i for i, prefixes in enumerate(LAYERS) if _within(module, prefixes))


def upward(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import from a lower layer to a higher one."""
    return sorted((m, t) for m, ts in g.items() for t in ts if layer(t) > layer(m))


def test_every_import_points_down() -> None:
    assert upward(graph()) == []


def test_the_layer_check_finds_an_upward_import() -> None:
    g = {"gateway.ops.onboard": {"gateway.console.x", "gateway.core.y"}, "gateway.console.x": {"gateway.ops.z"}}
    assert upward(g) == [("gateway.ops.onboard", "gateway.console.x")]


def test_core_imports_no_wing_ops_or_server() -> None:
    bad = sorted((m, t) for m, ts in graph().items() if m.startswith("gateway.core")
                 for t in ts if _within(t, WINGS + OUTER))
    assert bad == []


def test_a_wing_imports_no_other_wing_nor_the_outer_layers() -> None:
    bad = []
    for m, ts in graph().items():
        wing = _within(m, WINGS)
        if wing is None:
            continue
        bad += [(m, t) for t in ts if (_within(t, WINGS) not in (None, wing)) or _within(t, OUTER)]
    assert sorted(bad) == []


def test_indexes_know_nothing_of_the_gateway() -> None:
    assert sorted((m, t) for m, ts in graph().items() if m.startswith("indexes")
                  for t in ts if t.startswith("gateway")) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_400_lines(package: str) -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_every_index_module_serves_the_gateway() -> None:
    """indexes/ holds only what serving and ingest use: every module there is reached from
    gateway/'s imports (measuring programs live in bench/)."""
    g = graph()
    seen: set[str] = set()
    todo = [m for m in g if m.startswith("gateway")]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += g[m]
    assert sorted(m for m in g if m.startswith("indexes") and m not in seen) == []


BACKENDS = ("indexes.milvus",)
"""Engines behind `indexes.types.ServedIndex` that only `indexes.store` may open (docs/scaling.md)."""
ENGINE_CLIENTS = ("pymilvus", "milvus_lite")


def backend_imports(g: dict[str, set[str]], external: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(module, what it imports) for every gateway module importing a backend of `BACKENDS`
    (project graph `g`) or an engine client of `ENGINE_CLIENTS` (`external`: module → the
    top-level names of its non-project imports)."""
    bad = [(m, t) for m, ts in g.items() if m.startswith("gateway") for t in ts if _within(t, BACKENDS)]
    bad += [(m, t) for m, ts in external.items() if m.startswith("gateway") for t in ts if t in ENGINE_CLIENTS]
    return sorted(bad)


def external_imports() -> dict[str, set[str]]:
    """Module → the top-level package names it imports (lazy imports included)."""
    out: dict[str, set[str]] = {}
    for name, path in modules().items():
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                names |= {a.name.partition(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.partition(".")[0])
        out[name] = names
    return out


def test_the_gateway_never_imports_a_served_index_backend() -> None:
    """The core, the wings, the console and sync know an index only as `ServedIndex`."""
    assert backend_imports(graph(), external_imports()) == []


def test_the_backend_check_finds_one() -> None:
    g = {"gateway.core.retrieve": {"indexes.milvus.index"}, "indexes.store": {"indexes.milvus"}}
    ext = {"gateway.dify.handler": {"pymilvus"}, "indexes.milvus.client": {"pymilvus"}}
    assert backend_imports(g, ext) == [("gateway.core.retrieve", "indexes.milvus.index"),
                                       ("gateway.dify.handler", "pymilvus")]


def test_a_tantivy_index_is_a_served_index(tmp_path: Path) -> None:
    """Every member of `ServedIndex` is there on an opened Tantivy index (HybridIndex is one)."""
    from indexes.dense import HybridIndex
    from indexes.store import IndexStore, KnowledgeIndex
    from indexes.types import ServedIndex

    idx = IndexStore(tmp_path).create_or_open_for_write("kb")
    try:
        assert isinstance(idx, ServedIndex)
        assert issubclass(HybridIndex, KnowledgeIndex)
        assert not isinstance(object(), ServedIndex)
    finally:
        idx.close()
