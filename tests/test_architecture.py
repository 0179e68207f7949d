"""The import contract: arrows point one way (docs/architecture.md, DESIGN.md "Rooms").

Three rules over the project's own packages, read from the source with ``ast`` (every import
statement at any depth: module level, inside functions, under ``if TYPE_CHECKING``):

(a) the core (``rrma/``) imports nothing from its plug-ins or views: ``oracle``, ``agents``,
    ``tui``, ``benches``, ``cli``. It finds oracles and agents by name (rrma/plugins.py);
(b) nothing outside ``tui/`` imports ``tui`` except the module of the ``rrma-tui`` console script
    (pyproject.toml) and the TUI's own benchmark, benches/perf/bench_tui.py;
(c) no import circle anywhere: the file-level graph (a module imports the modules it names and
    the packages above them, whose ``__init__`` runs first) has no cycle;
(e) inside the core the log room is below the run room: ``rrma.log`` imports nothing from ``rrma.run``
    (the loop writes the log; the log, its readers and verify never need the loop).

Each rule is also run on a small synthetic tree with one planted bad import, so that a checker
that finds nothing cannot pass for a clean project.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("rrma", "oracle", "agents", "benches", "cli", "tui")
CORE = "rrma"
NOT_FOR_THE_CORE = ("oracle", "agents", "tui", "benches", "cli")
TUI_BENCHMARK = "benches.perf.bench_tui"
VIEWS = ("cli", "tui")
PLUGINS = ("oracle", "agents")

Graph = dict[str, set[str]]


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_of(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root`` (name -> file); a benchmark's workspace counts too."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[module_name(root, path)] = path
    return found


def imported_names(path: Path, name: str) -> set[str]:
    """The dotted names a module imports, relative imports resolved, at any depth of its tree."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base = ".".join(base_parts[: len(base_parts) - (node.level - 1)])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names if alias.name != "*")
    return names


def import_graph(root: Path, packages: Iterable[str]) -> Graph:
    """Module -> the project's modules it imports: the named module (``from a import b`` names the
    module ``a.b`` where it exists, else ``a``) and the packages above it (their ``__init__`` runs first)."""
    modules = modules_of(root, packages)
    graph: Graph = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for imported in imported_names(path, name):
            parts = imported.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if prefix in modules and prefix != name:
                    edges.add(prefix)
        graph[name] = edges
    return graph


def top(name: str) -> str:
    return name.split(".")[0]


def core_violations(graph: Graph) -> list[str]:
    """Rule (a): each import of a plug-in or view package by a module of the core."""
    return sorted(f"{src} imports {dst}" for src, dsts in graph.items() if top(src) == CORE
                  for dst in dsts if top(dst) in NOT_FOR_THE_CORE)


def tui_importers(graph: Graph, allowed: set[str]) -> list[str]:
    """Rule (b): each import of ``tui`` from outside it, other than by ``allowed`` modules."""
    return sorted(f"{src} imports {dst}" for src, dsts in graph.items()
                  if top(src) != "tui" and src not in allowed for dst in dsts if top(dst) == "tui")


def view_violations(graph: Graph) -> list[str]:
    """Rule (d): each import of a plug-in (oracle, agents) by a view (cli, tui): views read the log as data
    and reach plug-ins only by name through the core (a bench by its folder, an oracle by its kind)."""
    return sorted(f"{src} imports {dst}" for src, dsts in graph.items() if top(src) in VIEWS
                  for dst in dsts if top(dst) in PLUGINS)


LOWER_ROOMS = {"rrma.log": ("rrma.run",)}  # rule (e): room -> the rooms above it, which it must not import


def room_violations(graph: Graph) -> list[str]:
    """Rule (e): each import of a room above by a module of a room below (``LOWER_ROOMS``)."""
    def inside(name: str, room: str) -> bool:
        return name == room or name.startswith(room + ".")

    return sorted(f"{src} imports {dst}" for src, dsts in graph.items() for room, above in LOWER_ROOMS.items()
                  if inside(src, room) for dst in dsts if any(inside(dst, a) for a in above))


def circles(graph: Graph) -> list[list[str]]:
    """Rule (c): one shortest cycle (a → … → a) per tangle (:func:`tangles`)."""
    return [cycle_in(graph, set(component)) for component in tangles(graph)]


def tangles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (or of a module that imports
    itself): every module of one can reach every other. Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(sorted(component))
    return sorted(components)


def cycle_in(graph: Graph, component: set[str]) -> list[str]:
    """A shortest cycle through the component's first module (breadth-first, inside the component)."""
    first = min(component)
    previous: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(previous[path[-1]])
                    return [*reversed(path), first]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return [first, first]


def entry_point_module() -> str:
    """The module of the ``rrma-tui`` console script (pyproject.toml), the one way into the TUI."""
    target = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]["rrma-tui"]
    return target.partition(":")[0]


# ----------------------------------------------------------------------------- the project


@pytest.fixture(scope="module")
def project() -> Graph:
    return import_graph(REPO, PACKAGES)


def test_the_core_imports_no_plugin_and_no_view(project: Graph) -> None:
    assert any(top(m) == CORE for m in project) and any(top(m) == "oracle" for m in project)
    violations = core_violations(project)
    assert not violations, "rrma/ must find plug-ins by name (rrma/plugins.py):\n" + "\n".join(violations)


def test_only_the_entry_point_imports_the_tui(project: Graph) -> None:
    allowed = {entry_point_module(), TUI_BENCHMARK}
    assert any(top(m) == "tui" for m in project)
    violations = tui_importers(project, allowed)
    assert not violations, f"only {sorted(allowed)} may import tui/:\n" + "\n".join(violations)


def test_the_views_import_no_plugin(project: Graph) -> None:
    assert any(top(m) == "cli" for m in project)
    violations = view_violations(project)
    assert not violations, "cli/ and tui/ read runs through rrma/, never a plug-in's code:\n" + "\n".join(violations)


def test_the_checker_finds_a_view_importing_a_plugin(tmp_path: Path) -> None:
    root = plant(tmp_path, {"tui/widgets/x.py": "def f():\n    from agents.proof_search import steps\n",
                            "agents/proof_search.py": "", "cli/main.py": "import rrma\n", "rrma/__init__.py": ""})
    assert view_violations(import_graph(root, PACKAGES)) == ["tui.widgets.x imports agents",
                                                            "tui.widgets.x imports agents.proof_search"]


def test_the_log_room_imports_nothing_from_the_run_room(project: Graph) -> None:
    assert any(m.startswith("rrma.log.") for m in project) and any(m.startswith("rrma.run.") for m in project)
    violations = room_violations(project)
    assert not violations, "rrma/log/ is below rrma/run/ (the one promotion writer is rrma/run/promotion.py):\n" + \
        "\n".join(violations)


def test_the_checker_finds_the_log_room_importing_the_run_room(tmp_path: Path) -> None:
    root = plant(tmp_path, {"rrma/log/review.py": "def f():\n    from rrma.run.promotion import decide\n",
                            "rrma/run/promotion.py": "from rrma.log.state import RunState\n",  # downwards: fine
                            "rrma/log/state.py": "", "rrma/runner.py": "import rrma.log.state\n"})
    assert room_violations(import_graph(root, PACKAGES)) == ["rrma.log.review imports rrma.run",
                                                             "rrma.log.review imports rrma.run.promotion"]


def test_no_import_circles(project: Graph) -> None:
    found = [f"{' -> '.join(cycle_in(project, set(t)))}  (tangle of {len(t)}: {', '.join(t)})"
             for t in tangles(project)]
    for line in found:
        print("import circle:", line)
    assert not found, f"{len(found)} import circle(s):\n" + "\n".join(found)


# ----------------------------------------------------------------------------- the checker itself


def plant(root: Path, files: dict[str, str]) -> Path:
    for rel, source in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    for package in {Path(rel).parts[0] for rel in files}:
        for folder in [root / package, *(p for p in (root / package).rglob("*") if p.is_dir())]:
            (folder / "__init__.py").touch()
    return root


def test_the_checker_finds_a_core_import_of_a_plugin_inside_a_function(tmp_path: Path) -> None:
    root = plant(tmp_path, {
        "rrma/run/loop.py": "def build():\n    from oracle.coq import CoqOracle\n    return CoqOracle\n",
        "rrma/clean.py": "from rrma.run import loop\nimport json\n",
        "oracle/coq.py": "from rrma.clean import loop\nclass CoqOracle: ...\n",  # plug-ins may import the core
    })
    graph = import_graph(root, PACKAGES)
    assert core_violations(graph) == ["rrma.run.loop imports oracle", "rrma.run.loop imports oracle.coq"]


def test_the_checker_finds_a_tui_import_outside_the_entry_point(tmp_path: Path) -> None:
    root = plant(tmp_path, {
        "cli/main.py": "def open_tui():\n    import tui.app\n",  # the entry point: allowed
        "cli/runs.py": "from tui.screens.runs import RunsScreen\n",  # planted
        "benches/perf/bench_tui.py": "import tui.app\n",
        "tui/app.py": "from tui.screens import runs\n",  # tui may import itself
        "tui/screens/runs.py": "class RunsScreen: ...\n",
    })
    graph = import_graph(root, PACKAGES)
    assert tui_importers(graph, {"cli.main", TUI_BENCHMARK}) == [
        "cli.runs imports tui", "cli.runs imports tui.screens", "cli.runs imports tui.screens.runs"]


def test_the_checker_finds_each_circle_including_function_level_ones(tmp_path: Path) -> None:
    root = plant(tmp_path, {
        "cli/main.py": "from tui import app\n",
        "tui/app.py": "from tui.driver import Driver\n",
        "tui/driver.py": "def stop():\n    from cli.main import main\n",  # cli -> app -> driver -> cli
        "tui/screens/a.py": "from . import b\n",
        "tui/screens/b.py": "from .a import thing\n",  # a <-> b through a relative import
        "tui/screens/c.py": "import tui.screens.a\n",  # imports into the circle, not part of it
    })
    found = circles(import_graph(root, PACKAGES))
    assert found == [["cli.main", "tui.app", "tui.driver", "cli.main"],
                     ["tui.screens.a", "tui.screens.b", "tui.screens.a"]]


def test_a_package_init_that_imports_a_module_importing_a_sibling_is_a_circle(tmp_path: Path) -> None:
    # store's absolute import of a sibling runs the package's __init__ first, which imports store
    root = plant(tmp_path, {"rrma/log/store.py": "from rrma.log.events import Event\n",
                            "rrma/log/events.py": "class Event: ...\n"})
    (root / "rrma" / "log" / "__init__.py").write_text("from rrma.log.store import Event\n")
    assert circles(import_graph(root, PACKAGES)) == [["rrma.log", "rrma.log.store", "rrma.log"]]
    (root / "rrma" / "log" / "__init__.py").write_text('"""docstring only"""\n')
    assert circles(import_graph(root, PACKAGES)) == []
