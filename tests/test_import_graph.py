"""The direction of imports, read from the sources with `ast`: the compiler imports nothing from the
runtime, the server or the client; the runtime only the compiler; the client nothing from the server and
the server nothing from the client (both stand on the runtime); and no modules import each other in a cycle
(imports inside functions and under TYPE_CHECKING count too)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("compiler", "runtime", "server", "client", "migrations")


def _modules() -> dict[str, Path]:
    found = {"tilec": ROOT / "tilec" / "__init__.py"}
    for part in PARTS:
        for path in (ROOT / part).rglob("*.py"):
            name = ".".join(("tilec", *path.relative_to(ROOT).with_suffix("").parts))
            found[name.removesuffix(".__init__")] = path
    for path in (ROOT / "tilec").glob("*.py"):
        if path.name != "__init__.py":
            found[f"tilec.{path.stem}"] = path
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        parts = parts if is_package else parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)]
        base = ".".join([*parts, *([node.module] if node.module else [])])
    submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
    return submodules if len(submodules) == len(node.names) else [*submodules, base]


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _targets(name, path.name == "__init__.py", node, known):
                    while target and target not in known:  # `import a.b.c` names a.b.c's module or a parent
                        target = target.rpartition(".")[0]
                    if target and target != name and target != "tilec":
                        graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _part(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def _edges(source: str, targets: tuple[str, ...], graph: dict[str, set[str]] | None = None) -> list[tuple[str, str]]:
    graph = import_graph() if graph is None else graph
    return sorted((a, b) for a, bs in graph.items() for b in bs if _part(a) == source and _part(b) in targets)


def test_compiler_imports_nothing_from_runtime_server_or_client() -> None:
    assert _edges("compiler", ("runtime", "server", "client")) == []


def test_runtime_imports_only_the_compiler() -> None:
    graph = import_graph()
    assert _edges("runtime", ("server", "client", "migrations"), graph) == []
    outside = sorted((a, b) for a, bs in graph.items() for b in bs if _part(a) == "runtime" and b.startswith("tilec.")
                     and _part(b) not in ("runtime", "compiler"))
    assert outside == []  # nor tilec.wire, tilec.cli and the like


def test_server_imports_nothing_from_client() -> None:
    assert _edges("server", ("client",)) == []


def test_the_direction_checks_see_a_wrong_edge() -> None:
    graph = {"tilec.server.jobs.runner": {"tilec.client._jit"}, "tilec.runtime.bench": {"tilec.client._exceptions"}}
    assert _edges("server", ("client",), graph) == [("tilec.server.jobs.runner", "tilec.client._jit")]
    assert _edges("runtime", ("client",), graph) == [("tilec.runtime.bench", "tilec.client._exceptions")]


def test_client_imports_nothing_from_server() -> None:
    wrong = [(a, b) for a, bs in import_graph().items() for b in bs if _part(a) == "client" and _part(b) == "server"]
    assert wrong == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_check_sees_a_cycle_and_a_wrong_direction() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = import_graph()
    assert "tilec.compiler.ir" in graph["tilec.compiler.pipeline"]  # the graph sees real edges


def test_routes_stay_leaves_of_the_server() -> None:
    """Middleware and the fast path call the service layer, not routes; no route imports another."""
    routes = "tilec.server.api.routes."
    wrong = [(a, b) for a, bs in import_graph().items() for b in bs
             if b.startswith(routes) and a != "tilec.server.app" and not a.startswith("tilec.server.api.routes")]
    wrong += [(a, b) for a, bs in import_graph().items() for b in bs if a.startswith(routes) and b.startswith(routes)]
    assert wrong == []


def _closure(graph: dict[str, set[str]], module: str) -> set[str]:
    seen: set[str] = set()
    work = [module]
    while work:
        for step in graph.get(work.pop(), ()):
            if step not in seen:
                seen.add(step)
                work.append(step)
    return seen


def test_a_tune_worker_imports_no_api_module() -> None:
    """A Celery worker (celery_app -> runner) stores its builds through the store (server/db/artifacts.py),
    never through the API's compile module (server/service.py) or a route, and imports nothing of the client."""
    graph = import_graph()
    reached = _closure(graph, "tilec.server.jobs.celery_app")
    assert "tilec.server.jobs.runner" in reached and "tilec.server.db.artifacts" in reached  # the check sees edges
    wrong = sorted(m for m in reached if m == "tilec.server.service" or m.startswith(("tilec.server.api", "tilec.client")))
    assert wrong == []
