"""The lineage view: the trial tree (parent -> children), collapsed, the best path highlighted."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.timer import Timer
from textual.widgets import Footer, Static, Tree
from textual.widgets.tree import TreeNode

from tui.reader import RawEvent
from tui.screens.base import RunScreen, RunSession
from tui.widgets.trial_text import best_marker, fmt_score, fmt_sigma, glyph

REBUILD_INTERVAL = 2.0  # seconds between rebuilds of the tree while a run is live


class LineageScreen(RunScreen):
    BINDINGS = [
        Binding("b", "best_path", "Best path"),
        Binding("e", "expand_all", "Expand all"),
        Binding("c", "collapse_all", "Collapse all"),
        Binding("o", "open_trial", "Open trial"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, session: RunSession) -> None:
        super().__init__(session)
        self.nodes: dict[str, TreeNode[str]] = {}
        self._rebuild_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="lineage-title")
        yield Tree[str]("run", id="lineage")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.refresh_view([])
        self.query_one(Tree).focus()

    def label(self, trial_id: str, best_path: set[str]) -> Text:
        state = self.state
        rec = state.trials[trial_id]
        on_path = trial_id in best_path
        text = Text.assemble(best_marker(state, rec), glyph(rec.status), " ",
                             (rec.trial_id, "bold green" if on_path else "bold"), f" {fmt_score(rec.score)}")
        sigma = state.delta_sigma_of(rec.score) if rec.status == "ok" else None
        if sigma is not None:
            text.append(f" {fmt_sigma(sigma)}")
        text.append(f"  {rec.agent}: {rec.hypothesis[:60]}", "green" if on_path else "dim")
        if on_path:
            text.stylize("on #1f3b1f")
        return text

    def refresh_view(self, events: list[RawEvent]) -> None:
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
        best_path = {r.trial_id for r in state.lineage(state.best_id)} if state.best_id else set()
        expanded = {tid for tid, node in self.nodes.items() if node.is_expanded}
        cursor = tree.cursor_node.data if tree.cursor_node is not None else None
        tree.clear()
        tree.root.set_label(Text.assemble((state.task_name or "run", "bold"), f"  {len(state.order)} trials  ",
                                          ("highlighted: the path from the baseline to the best", "green")))
        children: dict[str | None, list[str]] = {}
        for tid in state.order:
            parent = state.trials[tid].parent
            if parent is not None and parent not in state.trials:
                parent = None
            children.setdefault(parent, []).append(tid)
        self.nodes = {}
        stack: list[tuple[TreeNode[str], str]] = [(tree.root, tid) for tid in reversed(children.get(None, []))]
        while stack:
            parent_node, tid = stack.pop()
            kids = children.get(tid, [])
            if kids:
                node = parent_node.add(self.label(tid, best_path), data=tid, expand=tid in expanded)
                stack.extend((node, k) for k in reversed(kids))
            else:
                node = parent_node.add_leaf(self.label(tid, best_path), data=tid)
            self.nodes[tid] = node
        tree.root.expand()
        self.query_one("#lineage-title", Static).update(Text.assemble(
            ("lineage ", "bold"), f"best {state.best_id or '-'}", ("  path ", "dim"),
            " ← ".join(r.trial_id for r in state.lineage(state.best_id)) if state.best_id else "-",
        ))
        if cursor is not None and cursor in self.nodes:
            tree.move_cursor(self.nodes[cursor])

    def action_best_path(self) -> None:
        state = self.state
        if not state.best_id:
            self.notify("no best yet")
            return
        for rec in reversed(state.lineage(state.best_id)):
            node = self.nodes.get(rec.trial_id)
            if node is not None:
                node.expand()
        tree: Tree[str] = self.query_one(Tree)
        target = self.nodes.get(state.best_id)
        if target is not None:
            self.call_after_refresh(tree.move_cursor, target)

    def action_expand_all(self) -> None:
        self.query_one(Tree).root.expand_all()

    def action_collapse_all(self) -> None:
        tree: Tree[str] = self.query_one(Tree)
        tree.root.collapse_all()
        tree.root.expand()

    def action_open_trial(self) -> None:
        tree: Tree[str] = self.query_one(Tree)
        node = tree.cursor_node
        if node is not None and node.data:
            self._open(node.data)

    @on(Tree.NodeSelected)
    def _selected(self, message: Tree.NodeSelected[str]) -> None:
        if message.node.data and not message.node.allow_expand:
            self._open(message.node.data)

    def _open(self, trial_id: str) -> None:
        from tui.screens.trial import TrialScreen

        self.app.push_screen(TrialScreen(self.session, trial_id))

    def action_back(self) -> None:
        self.app.pop_screen()
