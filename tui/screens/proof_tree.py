"""The proof-search tree of a trial: every tactic the search agent tried, state by state.

Opened with ``P`` from the trial view of a proof found by the search agent (agents/proof_search.py
records the tree in the proposal's ``meta.search_tree``). Each row under a state is one tactic run
from it with its outcome; a tactic that led to a new state holds that state's own tries. The found
proof's steps are marked ``★`` and unfolded; the panel on the right shows the goals of the state
under the cursor, so a person can step through what the prover saw before approving the trial.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from tui.screens.base import WorkerScreen
from tui.widgets.footer import KeysFooter

# the outcome codes of agents/proof_search.py's SearchTree.add_try, in words
OUTCOMES: dict[str, tuple[str, str]] = {
    "p": ("new state", "cyan"), "P": ("proved", "bold green"), "e": ("error", "red"), "t": ("timeout", "yellow"),
    "r": ("refused by the screen", "red"), "n": ("did not close the goal", "dim"), "d": ("a state seen before", "dim"),
    "v": ("vetoed (axioms)", "red"),
}
CLIP = 70  # characters of a tactic or goal line in a tree row
FAILED = {"e", "t", "r", "v"}  # the outcomes a try records why for (agents/proof_search.py: the prover's error, a veto)


def _clip(text: str, n: int = CLIP) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


class ProofTree:
    """A recorded search tree, read defensively (a tree from another version never crashes the view)."""

    def __init__(self, tree: dict[str, Any]) -> None:
        self.raw = tree
        self.nodes: list[list[Any]] = [n for n in tree.get("nodes") or [] if isinstance(n, list) and len(n) >= 5]
        self.goals: dict[str, list[str]] = {k: list(v) for k, v in (tree.get("goals") or {}).items()
                                            if isinstance(v, list)}
        self.proof: set[int] = {k for k in tree.get("proof") or [] if isinstance(k, int)}
        self.tries_from: dict[int, list[list[Any]]] = {}
        for t in tree.get("tries") or []:
            if isinstance(t, list) and len(t) >= 5 and isinstance(t[0], int):
                self.tries_from.setdefault(t[0], []).append(t)

    def goal_count(self, node: int) -> int:
        return int(self.nodes[node][3]) if 0 <= node < len(self.nodes) else 0

    def goals_of(self, node: int) -> list[str]:
        return self.goals.get(str(self.nodes[node][4]), []) if 0 <= node < len(self.nodes) else []

    def state_text(self, node: int) -> str:
        count = self.goal_count(node)
        goals = self.goals_of(node)
        if count == 0:
            return "no goals"
        first = goals[0].splitlines()[-1] if goals and goals[0].splitlines() else "?"
        return f"{count} goal(s): {_clip(first, 50)}"


class ProofTreeScreen(WorkerScreen):
    BINDINGS = [
        Binding("e", "expand_all", "Expand all"),
        Binding("z", "collapse_all", "Collapse all"),
        Binding("escape", "back", "Back"),
    ]
    DEFAULT_CSS = """
    ProofTreeScreen #ptree-title { height: auto; padding: 0 1; }
    ProofTreeScreen #ptree-body { height: 1fr; }
    ProofTreeScreen #ptree-tree { width: 3fr; }
    ProofTreeScreen #ptree-goals { width: 2fr; border-left: solid $primary; padding: 0 1; }
    """

    def __init__(self, trial_id: str, theorem: str, tree: dict[str, Any]) -> None:
        super().__init__()
        self.trial_id = trial_id
        self.theorem = theorem
        self.search = ProofTree(tree)
        # a row that led to no new state has data -2 - i: the i-th of these tries (its panel says what became of it)
        self.leaf_tries: list[list[Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="ptree-title")
        with Horizontal(id="ptree-body"):
            yield Tree(Text("the statement"), data=0, id="ptree-tree")
            with VerticalScroll(id="ptree-goals"):
                yield Static("", id="ptree-goal-text")
        yield KeysFooter()

    def _title(self) -> Text:
        raw = self.search.raw
        used, budget = raw.get("used") or {}, raw.get("budget") or {}
        tries = sum(len(v) for v in self.search.tries_from.values())
        text = Text.assemble(("proof search ", "dim"), (self.theorem or "?", "bold"), ("  trial ", "dim"),
                             self.trial_id, "  ", (str(raw.get("result", "?")), "bold"),
                             ("  ", "dim"), f"{used.get('checks', '?')} tactic runs, {used.get('seconds', '?')} s",
                             (f" of {budget.get('checks', '?')} / {budget.get('seconds', '?')} s", "dim"),
                             ("  ", "dim"), f"{len(self.search.nodes)} states, {tries} tries kept")
        if raw.get("dropped_tries"):
            text.append(f" ({raw['dropped_tries']} not kept)", "dim")
        return text

    def on_mount(self) -> None:
        widget: Tree[int] = self.query_one(Tree)
        widget.root.set_label(Text.assemble(("the statement  ", "bold"), (self.search.state_text(0), "dim")))
        self._fill(widget.root, 0)
        widget.root.expand()
        widget.focus()
        self._show_goals(0)

    def _fill(self, parent: TreeNode[int], node: int) -> None:
        """The tries from ``node`` under ``parent``, and recursively the states they led to (no recursion
        in Python: a deep proof never hits the interpreter's limit)."""
        stack = [(parent, node)]
        while stack:
            under, k = stack.pop()
            for entry in self.search.tries_from.get(k, []):
                _node, tactic, code, child, ms = entry[:5]
                why = str(entry[5]) if len(entry) > 5 and entry[5] else ""
                word, style = OUTCOMES.get(str(code), (str(code), "dim"))
                on_path = isinstance(child, int) and child in self.search.proof
                label = Text.assemble(("★ " if on_path else "  ", "bold yellow"), (_clip(tactic), "bold" if on_path else ""),
                                      ("  → ", "dim"), (word, style))
                if isinstance(child, int) and child >= 0:
                    label.append(f"  {self.search.state_text(child)}", "dim")
                if isinstance(ms, int | float):
                    label.append(f"  {ms:g} ms", "dim")
                if why:
                    label.append(f"  {_clip(why, 40)}", style)
                has_children = isinstance(child, int) and child >= 0 and bool(self.search.tries_from.get(child))
                data = child if isinstance(child, int) and child >= 0 else -2 - len(self.leaf_tries)
                if data < 0:
                    self.leaf_tries.append(entry)
                item = under.add(label, data=data, allow_expand=has_children) if has_children \
                    else under.add_leaf(label, data=data)
                if has_children:
                    stack.append((item, child))
                    if on_path:
                        item.expand()

    def _show_goals(self, node: int) -> None:
        panel = self.query_one("#ptree-goal-text", Static)
        if node < 0:  # a try that led to no new state: what became of it (an error says which), never a state's goals
            panel.update(self._try_text(self.leaf_tries[-2 - node] if 0 <= -2 - node < len(self.leaf_tries) else None))
            return
        goals = self.search.goals_of(node)
        count = self.search.goal_count(node)
        text = Text(f"state {node}: ", "dim")
        text.append("no goals: proved\n" if count == 0 else f"{count} goal(s)\n", "green" if count == 0 else "bold")
        for i, goal in enumerate(goals, 1):
            text.append(f"\ngoal {i}\n", "dim")
            text.append(f"{goal}\n")
        if count > len(goals):
            text.append(f"\n… {count - len(goals)} more goal(s) not recorded\n", "dim")
        panel.update(text)

    def _try_text(self, entry: list[Any] | None) -> Text:
        if entry is None:
            return Text("this tactic led to no new state", "dim")
        _node, tactic, code, _child, _ms = entry[:5]
        word, style = OUTCOMES.get(str(code), (str(code), "dim"))
        text = Text.assemble(("tried on state ", "dim"), str(_node), ("\n", ""), (str(tactic), "bold"), "\n→ ",
                             (word, style), ": it led to no new state\n")
        why = str(entry[5]) if len(entry) > 5 and entry[5] else ""
        if why:
            text.append(f"\n{why}\n", style)
        elif str(code) in FAILED:
            text.append("\n(this search did not record the prover's message)\n", "dim")
        return text

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[int]) -> None:
        self._show_goals(event.node.data if isinstance(event.node.data, int) else -1)

    def action_expand_all(self) -> None:
        self.query_one(Tree).root.expand_all()

    def action_collapse_all(self) -> None:
        root = self.query_one(Tree).root
        root.collapse_all()
        root.expand()

    def action_back(self) -> None:
        self.app.pop_screen()
