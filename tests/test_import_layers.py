"""Imports between trainhub's modules run one way (issue 22): no module imports - directly or through
others - a module that imports it.

The graph is read from the source with `ast`: every `import` and `from ... import` anywhere in a module
(inside functions too: a lazy import is still a dependency), except under `if TYPE_CHECKING:`. Importing
`a.b.c` depends on `a.b.c` and on the packages `a` and `a.b`, whose `__init__` runs first.

KNOWN_CYCLES lists cycles tolerated while they are taken apart - none since services ask for
background work by task name (trainhub.common.enqueue) instead of importing tasks. Any cycle fails
the test; an entry whose cycle is gone must be removed (test_every_known_cycle_still_exists says so).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "trainhub"

KNOWN_CYCLES: dict[str, frozenset[str]] = {}


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """Every module of the package by dotted name: (its file, whether it is a package's __init__)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_names(source: str, name: str, is_package: bool) -> set[str]:
    """The absolute names a module's imports name: `a.b` for `import a.b`, `a.b` and `a.b.c` for
    `from a.b import c` (whichever of them is a module is sorted out by the caller)."""
    found: set[str] = set()
    here = name.split(".") if is_package else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit_node(other)
            else:
                visit_node(child)

    def visit_node(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + [node.module or ""]) if node.level else node.module
            base = base.rstrip(".")
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        visit(node)

    visit(ast.parse(source))
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (and the packages above them)."""
    modules = module_files(root, package)
    graph = {}
    for name, (path, is_package) in modules.items():
        targets = set()
        for imported in imported_names(path.read_text(encoding="utf-8"), name, is_package):
            parts = imported.split(".")
            targets.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def cycles(graph: Mapping[str, Iterable[str]]) -> list[frozenset[str]]:
    """The groups of modules that import each other (strongly connected components of two or more)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        # Tarjan's algorithm, iteratively: (node, its successors still to visit).
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph.get(successor, ())))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(frozenset(group))
    return found


def a_cycle_in(graph: Mapping[str, Iterable[str]], group: frozenset[str]) -> list[str]:
    """One import path that leaves a module of ``group`` and comes back to it, for the failure message."""
    start = min(group)
    paths = {successor: [start, successor] for successor in sorted(graph[start]) if successor in group}
    queue = list(paths)
    while queue:
        node = queue.pop(0)
        if node == start:
            return paths[node]
        for successor in sorted(graph[node]):
            if successor in group and successor not in paths:
                paths[successor] = [*paths[node], successor]
                queue.append(successor)
    return sorted(group)


def test_it_finds_a_cycle_and_leaves_what_only_points_into_it() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]
    assert a_cycle_in(graph, frozenset({"a", "b", "c"})) == ["a", "b", "c", "a"]


def test_it_reads_relative_lazy_and_type_checking_imports() -> None:
    source = ("from . import models\nfrom ..jobs.services import job_submit\n"
              "def f():\n    import trainhub.scheduling.tasks\n"
              "if TYPE_CHECKING:\n    from trainhub.iam.models import Project\n")
    assert imported_names(source, "trainhub.resources.services", is_package=False) == {
        "trainhub.resources", "trainhub.resources.models", "trainhub.jobs.services",
        "trainhub.jobs.services.job_submit", "trainhub.scheduling.tasks"}


def test_no_new_import_cycle() -> None:
    graph = import_graph()
    new = [group for group in cycles(graph) if not any(group <= known for known in KNOWN_CYCLES.values())]
    assert not new, ("new import cycles (make the imports run one way: tasks and APIs above services, services "
                     "above pure modules and models):\n" + "\n".join(
                         " -> ".join(a_cycle_in(graph, group)) + f"   (all of: {', '.join(sorted(group))})"
                         for group in new))


def test_every_known_cycle_still_exists() -> None:
    found = cycles(import_graph())
    gone = [name for name, known in KNOWN_CYCLES.items() if not any(group & known for group in found)]
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


def test_the_cli_imports_run_one_way() -> None:
    """main assembles the command modules, which build on base, which builds on the client: none of
    them imports main, and base imports no command module (only the client, the parsers' helpers it
    re-exports lazily, and the spec parsers)."""
    graph = import_graph()
    assert [group for group in cycles(graph) if any(name.startswith("trainhub.cli.") for name in group)] == []
    cli_modules = {name for name in graph if name.startswith("trainhub.cli.")}
    for name in cli_modules - {"trainhub.cli.main"}:
        assert "trainhub.cli.main" not in graph[name], name
    assert graph["trainhub.cli.base"] & cli_modules <= {"trainhub.cli.client", "trainhub.cli.parsing",
                                                              "trainhub.cli.worker_pool_spec"}
