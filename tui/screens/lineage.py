"""The lineage view: the trial tree (parent -> children), collapsed, the best path highlighted.

A long run's best path can be a thousand trials deep; nested a level per generation it would
be a column of guide lines (and Textual's tree walks its nesting recursively). So a tree more
than :data:`MAX_NESTING` generations deep is drawn with each line of descent flat: a trial's
main child (the one on the best path, else the one with most descendants) is listed right after
it at the same level, marked ``↳``, and only its other children nest under it. That keeps the
nesting to a few levels (at most log2 of the trial count off the best path) while every trial
is still under or right after its parent. The layout is computed without recursion, and in a
run of more than :data:`EAGER_NODES` trials a node's rows are added when it is first expanded,
so a 5,000-trial run opens with the ~1,200 rows it shows.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from rrma.log.codec import LogEvent
from rrma.log.state import RunState
from tui.messages import OpenTrial
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.trial_text import SIGMA_LEGEND, best_marker, fit_line, fmt_score, fmt_sigma, glyph

REBUILD_INTERVAL = 2.0  # seconds between rebuilds of the tree while a run is live
MAX_NESTING = 12  # generations nested one level each; a deeper tree is drawn with its lines of descent flat
EAGER_NODES = 1000  # a run with more trials adds a node's rows to the tree when it is first expanded
TITLE_PATH = 8  # trials of the best path named in the title (the nearest to the best, then the baseline)


@dataclass
class Layout:
    """Where each trial is drawn: ``rows[key]`` are the trials listed under ``key`` (None: the top)."""

    rows: dict[str | None, list[str]]
    continues: set[str]  # trials listed right after their parent (flat), not under it
    depth: int  # generations in the run's tree


def lineage_layout(state: RunState, best_path: set[str], max_nesting: int = MAX_NESTING) -> Layout:
    """Nest the trial tree as it is if it is at most ``max_nesting`` deep, else flatten its lines of descent."""
    children: dict[str | None, list[str]] = {}
    for tid in state.order:
        parent = state.trials[tid].parent
        if parent is not None and parent not in state.trials:
            parent = None
        children.setdefault(parent, []).append(tid)
    # subtree sizes and heights, children before parents (no recursion: a path may be thousands deep)
    order: list[str] = []
    stack = list(children.get(None, []))
    while stack:
        tid = stack.pop()
        order.append(tid)
        stack.extend(children.get(tid, []))
    size: dict[str, int] = {}
    height: dict[str, int] = {}
    for tid in reversed(order):
        kids = children.get(tid, [])
        size[tid] = 1 + sum(size[k] for k in kids)
        height[tid] = 1 + max((height[k] for k in kids), default=0)
    depth = max((height[r] for r in children.get(None, [])), default=0)
    if depth <= max_nesting:
        return Layout(children, set(), depth)
    rows: dict[str | None, list[str]] = {}
    continues: set[str] = set()

    def heir(tid: str) -> str | None:
        kids = children.get(tid, [])
        if not kids:
            return None
        on_path = [k for k in kids if k in best_path]
        return on_path[0] if on_path else max(kids, key=lambda k: size[k])

    def line_from(start: str) -> list[str]:
        line = [start]
        nxt = heir(start)
        while nxt is not None:
            continues.add(nxt)
            line.append(nxt)
            nxt = heir(nxt)
        return line

    rows[None] = [t for r in children.get(None, []) for t in line_from(r)]
    for tid in order:
        main = heir(tid)
        side = [t for k in children.get(tid, []) if k != main for t in line_from(k)]
        if side:
            rows[tid] = side
    return Layout(rows, continues, depth)


def path_text(path: list[str], limit: int = TITLE_PATH) -> str:
    """``best ← parent ← …`` with at most ``limit`` trials named (the baseline end always shown)."""
    if len(path) <= limit:
        return " ← ".join(path)
    return " ← ".join([*path[: limit - 1], f"… {len(path) - limit} more", path[-1]])


class LineageTree(Tree[str]):
    """The lineage tree: Enter opens the trial under the cursor, space folds or unfolds it."""

    BINDINGS = [
        Binding("enter", "select_cursor", "Open trial"),
        Binding("space", "toggle_node", "Fold"),
    ]

    def on_mount(self) -> None:
        self.auto_expand = False  # Enter selects (opens the trial) without folding the node


class LineageScreen(RunScreen):
    BINDINGS = [
        Binding("b", "best_path", "Best path"),
        Binding("e", "expand_all", "Expand all"),
        Binding("z", "collapse_all", "Collapse all"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.nodes: dict[str, TreeNode[str]] = {}  # the trials added to the tree so far
        self._rebuild_timer: Timer | None = None
        self._layout = Layout({}, set(), 0)
        self._drawn_under: dict[str, str] = {}  # trial -> the trial it is listed under (absent: the top level)
        self._best_path: set[str] = set()
        self._unfilled: set[str] = set()  # trials in the tree whose rows are not added yet (collapsed)

    def compose(self) -> ComposeResult:
        yield Static("", id="lineage-title")
        yield LineageTree("run", id="lineage")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.refresh_view([])
        self.query_one(Tree).focus()

    def label(self, trial_id: str, best_path: set[str], continues: bool = False) -> Text:
        state = self.state
        rec = state.trials[trial_id]
        on_path = trial_id in best_path
        text = Text.assemble(("↳ " if continues else "", "dim"), best_marker(state, rec), glyph(rec.status), " ",
                             (rec.trial_id, "bold green" if on_path else "bold"), f" {fmt_score(rec.score)}")
        sigma = state.delta_sigma_of(rec.score) if rec.status == "ok" else None
        if sigma is not None:
            text.append(f" {fmt_sigma(sigma)}")
        text.append(f"  {rec.agent}: {rec.hypothesis[:60]}", "green" if on_path else "dim")
        if on_path:
            text.stylize("on #1f3b1f")
        return text

    def refresh_view(self, events: list[LogEvent]) -> None:
        if events:
            # a live run: rebuild the tree at most every REBUILD_INTERVAL seconds
            if self._rebuild_timer is None and any(
                    e.kind in ("trial.proposed", "trial.finished", "trial.promoted", "review") for e in events):
                self._rebuild_timer = self.set_timer(REBUILD_INTERVAL, self._rebuild)
            return
        self._rebuild()

    def _rebuild(self) -> None:
        self._rebuild_timer = None
        state = self.state
        tree: Tree[str] = self.query_one(Tree)
        path = [r.trial_id for r in state.lineage(state.best_id)] if state.best_id else []
        best_path = set(path)
        expanded = {tid for tid, node in self.nodes.items() if node.is_expanded}
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        tree.clear()
        layout = self._layout = lineage_layout(state, best_path)
        self._best_path = best_path
        self._drawn_under = {k: key for key, kids in layout.rows.items() if key is not None for k in kids}
        flat = ("  ↳ continues the line above", "dim") if layout.continues else ""
        trials = len(state.agent_trials())  # counted as the dashboard's header counts them
        baselines = len(state.order) - trials
        tree.root.set_label(Text.assemble((state.task_name or "run", "bold"), f"  trials {trials}",
                                          (f" + {baselines} baseline" if baselines else "", "dim"), "  ",
                                          ("green: the best path", "green"), flat))
        self.nodes = {}
        self._unfilled = set()
        eager = len(state.order) <= EAGER_NODES
        for tid in layout.rows.get(None, []):
            self._add(tree.root, tid, expanded, eager=eager)
        tree.root.expand()
        title = self.query_one("#lineage-title", Static)
        width = title.content_region.width or self.app.size.width - 2
        head = Text.assemble(("lineage ", "bold"), f"best {state.best_id or '-'}", ("  path ", "dim"))
        limit = TITLE_PATH
        while limit > 2 and head.cell_len + len(path_text(path, limit)) > width:
            limit -= 1  # name fewer trials of the path rather than cut the line at the edge
        title.update(fit_line([(head, 0), (Text(path_text(path, limit) or "-"), 1),
                               (Text(f"   {SIGMA_LEGEND}", "dim"), 2)], width))
        target = self._ensure(cursor) if cursor is not None else None
        if target is not None:
            tree.move_cursor(target)

    def _add(self, under: TreeNode[str], trial_id: str, expanded: set[str], *, eager: bool) -> None:
        """Add a trial under ``under``, with its rows if it is expanded (or ``eager``); iterative."""
        layout = self._layout
        stack = [(under, trial_id)]
        while stack:
            parent_node, tid = stack.pop()
            kids = layout.rows.get(tid, [])
            label = self.label(tid, self._best_path, tid in layout.continues)
            if kids:
                is_open = tid in expanded
                node = parent_node.add(label, data=tid, expand=is_open)
                if is_open or eager:
                    stack.extend((node, k) for k in reversed(kids))
                else:
                    self._unfilled.add(tid)
            else:
                node = parent_node.add_leaf(label, data=tid)
            self.nodes[tid] = node

    def _fill(self, trial_id: str) -> None:
        """Add the rows under a trial if they were left out (its node exists)."""
        if trial_id in self._unfilled:
            self._unfilled.discard(trial_id)
            node = self.nodes[trial_id]
            for kid in self._layout.rows.get(trial_id, []):
                self._add(node, kid, set(), eager=False)

    def _ensure(self, trial_id: str) -> TreeNode[str] | None:
        """The trial's node, adding the rows it is listed under first if they were left out."""
        above: list[str] = []
        cur = self._drawn_under.get(trial_id)
        while cur is not None:
            above.append(cur)
            cur = self._drawn_under.get(cur)
        for tid in reversed(above):
            self._fill(tid)
        return self.nodes.get(trial_id)

    @on(Tree.NodeExpanded)
    def _node_expanded(self, message: Tree.NodeExpanded[str]) -> None:
        if message.node.data:
            self._fill(message.node.data)

    def action_best_path(self) -> None:
        state = self.state
        if not state.best_id:
            self.notify("no best yet")
            return
        tree: Tree[str] = self.query_one(Tree)
        target = self._ensure(state.best_id)
        if target is None:
            return
        self._fill(state.best_id)
        above: TreeNode[str] | None = target  # the best and what it is drawn under: a few nodes, however deep the path
        while above is not None:
            above.expand()
            above = above.parent
        self.call_after_refresh(tree.move_cursor, target)

    def action_expand_all(self) -> None:
        while self._unfilled:
            self._fill(next(iter(self._unfilled)))
        self.query_one(Tree).root.expand_all()

    def action_collapse_all(self) -> None:
        tree: Tree[str] = self.query_one(Tree)
        tree.root.collapse_all()
        tree.root.expand()

    @on(Tree.NodeSelected)
    def _selected(self, message: Tree.NodeSelected[str]) -> None:
        if message.node.data:  # Enter on any trial opens it (space folds)
            self._open(message.node.data)

    def _open(self, trial_id: str) -> None:
        self.post_message(OpenTrial(self.session, trial_id))

    def action_back(self) -> None:
        self.app.pop_screen()
