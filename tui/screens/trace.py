"""The trace view: an agent's turns one at a time (model text, tool calls, tool results).

Turns are never all loaded: the list is a :class:`LineTable` over indices into the run's turn
index, each visible row and the selected step read from the log with ``pread`` (LRU-cached).
Filters: agent (cycle with ``a``) and trial (``t`` toggles the trial of the current step). An
audit finding opens it on the turn it cites (the trial view's Enter on a finding). A
trial's turns are those that name it plus, for turns that name no trial, the same agent's turns
since its previous proposal (what the agent did on the way to that proposal). Search runs in a
worker over the filtered turns, from the current step on.

The list follows a live run (LineTable's follow mode): while the cursor is on the last turn,
new turns keep it there and the detail shows the newest step; moving off it stops that, ``End``
resumes. Colours come from the app's theme (tui.palette) and change with it.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.theme import Theme
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from rrma.log.reader import RawEvent, TurnRef
from tui.messages import OpenTrial
from tui.palette import Palette, Tone, palette_of
from tui.screens.base import RunScreen, RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable

TURN_COLUMNS = [
    Column("seq", "seq", 7, "right", drop=5), Column("agent", "agent", 10, drop=2), Column("role", "role", 11),
    Column("tool", "tool", 10, drop=3), Column("trial", "trial", 7, drop=4), Column("text", "text", 0, drop=1),
]
ROLE_TONE: dict[str, Tone] = {"assistant": "primary", "tool_call": "warning", "tool_result": "success",
                              "user": "accent", "system": "muted", "error": "error"}


def turn_search_text(data: dict[str, object]) -> str:
    args = data.get("args")
    return " ".join(str(x) for x in (data.get("text"), data.get("tool"), json.dumps(args) if args else "",
                                     data.get("result")) if x).lower()


class TraceScreen(RunScreen):
    BINDINGS = [
        Binding("down,j", "step(1)", "Next step", show=False),
        Binding("up,k", "step(-1)", "Prev step", show=False),
        Binding("a", "agent_filter", "Agent"),
        Binding("t", "trace", "Trace: this trial only"),  # t is "the trace of this trial" on every screen
        Binding("g", "goto_trial", "Go to trial"),
        Binding("slash", "search", "Search"),
        Binding("n", "next_match(1)", "Next match"),
        Binding("N", "next_match(-1)", "Prev match"),
        Binding("escape", "back", "Back"),
    ]

    @dataclass
    class StepShown(Message):
        """The step on screen changed (coalesced)."""

        index: int | None  # into the run's turn index

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, TraceScreen.StepShown)

    @dataclass
    class SearchDone(Message):
        query: str
        index: int | None  # turn index of the match, None if none

    def __init__(self, session: RunSession, *, agent: str | None = None, trial_id: str | None = None,
                 cited: tuple[int, ...] = ()) -> None:
        super().__init__(session)
        self.agent_filter = agent
        self.trial_filter = trial_id
        self.cited = list(cited)  # an audit finding's cited seqs, until the cursor is on the turn they point at
        self.query_text = ""
        self._proposals: dict[str, list[tuple[int, str]]] = {}
        self._palette: Palette | None = None
        self._shown_key: str | None = None  # the step in the detail pane

    def compose(self) -> ComposeResult:
        yield Static("", id="trace-title")
        yield Input(placeholder="search turns (Enter searches, Esc closes)", id="trace-search")
        with Horizontal(id="trace-body"):
            yield LineTable(TURN_COLUMNS, self._row, id="turns")
            with VerticalScroll(id="turn-detail"):
                yield Static("", id="turn-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one("#trace-search").display = False
        table = self.query_one("#turns", LineTable)
        table.focus()
        table.border_title = "turns"
        self.app.theme_changed_signal.subscribe(self, self._theme_changed)
        jumping = bool(self.cited)
        self.refresh_view([])
        if self.trial_filter is None and self.state.finish_reason and not jumping:  # a finished run reads from its start
            table.action_edge(0)
            table.following = False

    @property
    def palette(self) -> Palette:
        if self._palette is None:
            self._palette = palette_of(self.app)
        return self._palette

    def _theme_changed(self, theme: Theme) -> None:
        self._palette = None
        self.query_one("#turns", LineTable).refresh()
        self._title()
        self._show(self.query_one("#turns", LineTable).cursor_key)

    def role_style(self, role: str) -> Style:
        tone = ROLE_TONE.get(role)
        return self.palette.tone(tone) if tone is not None else Style()

    # ------------------------------------------------------------------ filtering

    def _proposal_index(self) -> dict[str, list[tuple[int, str]]]:
        """agent -> [(proposed seq, trial id)] in order, for attributing turns to trials."""
        out: dict[str, list[tuple[int, str]]] = {}
        for tid in self.state.order:
            rec = self.state.trials[tid]
            if not rec.baseline:
                out.setdefault(rec.agent, []).append((rec.proposed_seq, tid))
        return out

    def trial_of(self, ref: TurnRef) -> str | None:
        """The trial a turn worked towards: the one it names, else its agent's next proposal."""
        if ref.trial_id:
            return ref.trial_id
        props = self._proposals.get(ref.agent, [])
        i = bisect.bisect_left(props, (ref.seq, ""))
        return props[i][1] if i < len(props) else None

    def filtered(self) -> list[int]:
        model = self.model
        if model is None:
            return []
        turns = model.turns
        agent, trial = self.agent_filter, self.trial_filter
        if trial is None:
            return [i for i, t in enumerate(turns) if agent is None or t.agent == agent]
        rec = self.state.trials.get(trial)
        lo = -1
        if rec is not None:
            props = self._proposals.get(rec.agent, [])
            i = bisect.bisect_left(props, (rec.proposed_seq, ""))
            lo = props[i - 1][0] if i > 0 else -1
        out = []
        for i, t in enumerate(turns):
            if agent is not None and t.agent != agent:
                continue
            if t.trial_id == trial or (rec is not None and t.trial_id is None and t.agent == rec.agent
                                       and t.indexed and lo < t.seq <= rec.proposed_seq):
                out.append(i)
        return out

    def refresh_view(self, events: list[RawEvent]) -> None:
        if events and not any(e.kind in ("agent.turn", "trial.proposed") for e in events):
            return
        self._proposals = self._proposal_index()
        table = self.query_one("#turns", LineTable)
        table.live_end = "bottom" if self.trial_filter is None else None  # a trial's turns are history
        table.set_rows([str(i) for i in self.filtered()])
        if self.cited:
            self._go_to_cited()
        self._title()
        self._show(table.cursor_key)

    def _go_to_cited(self) -> None:
        """Put the cursor on the first cited seq that is an agent turn (turns are in seq order); when none is
        (a finding citing a proposal or a post), on the last turn of the list before the first cited seq.
        Waits for the turn index while it is incomplete (the turn may be among those not indexed yet)."""
        model = self.model
        if model is None:
            return
        turns = model.turns
        found = None
        for seq in self.cited:
            i = bisect.bisect_left(turns, seq, key=lambda t: t.seq)
            if i < len(turns) and turns[i].seq == seq:
                found = i
                break
        if found is None and not model.turns_indexed:
            return
        cited, self.cited = self.cited, []
        table = self.query_one("#turns", LineTable)
        if found is not None:
            if table.index_of(str(found)) is None and self.trial_filter is not None:
                self.trial_filter = None  # attributed to no trial or another one: show every turn
                table.live_end = "bottom"
                table.set_rows([str(i) for i in self.filtered()])
            table.move_to(str(found))
            return
        before = [key for key in table.rows if turns[int(key)].seq < cited[0]]
        if before:
            table.move_to(before[-1])
            self.notify(f"seq {cited[0]} is not an agent turn: the turn before it")
        else:
            self.notify(f"no agent turn before seq {cited[0]}", severity="warning")

    def _title(self) -> None:
        model = self.model
        total = len(model.turns) if model else 0
        shown = len(self.query_one("#turns", LineTable).rows)
        muted = self.palette.muted
        text = Text.assemble(("trace ", "bold"), f"{shown} of {total} turns", ("  agent ", muted), self.agent_filter or "all",
                             ("  trial ", muted), self.trial_filter or "all")
        if self.query_text:
            text.append(f"  search {self.query_text!r}", self.palette.warning)
        if model is not None and not model.turns_indexed:
            text.append("  (indexing turns…)", muted)
        self.query_one("#trace-title", Static).update(text)

    # ------------------------------------------------------------------ drawing

    def _row(self, key: str) -> list[str | Text]:
        model = self.model
        assert model is not None
        ref = model.turns[int(key)]
        data = model.turn_data(ref)
        if not ref.indexed:
            raw = model.read_line(ref)
            if raw is not None:
                ref.fill(raw)
        role = ref.role or ""
        body = (data.get("text") or data.get("result") or (json.dumps(data.get("args")) if data.get("args") else "") or "")
        first = str(body).strip().splitlines()[0] if str(body).strip() else ""
        return [str(ref.seq), ref.agent, Text(role, self.role_style(role)), ref.tool or "", self.trial_of(ref) or "", first]

    def _show(self, key: str | None) -> None:
        """Show step ``key`` in the detail pane (from its top if it is another step than the one shown)."""
        target = self.query_one("#turn-text", Static)
        model = self.model
        if key != self._shown_key:  # a redraw of the same step keeps the reader's place
            self._shown_key = key
            self.query_one("#turn-detail", VerticalScroll).scroll_home(animate=False)
        palette = self.palette
        if key is None or model is None:
            target.update(Text("no turns", palette.muted))
            self.post_message(self.StepShown(None))
            return
        index = int(key)
        ref = model.turns[index]
        data = model.turn_data(ref)
        table = self.query_one("#turns", LineTable)
        role = str(data.get("role", ref.role or ""))
        head = Text.assemble(
            (f"step {table.cursor + 1}/{len(table.rows)}", "bold"), f"  seq {ref.seq}  ",
            (ref.agent, palette.primary + Style(bold=True)), f" turn {data.get('step', '')}  ", (role, self.role_style(role)),
        )
        if data.get("tool"):
            head.append(f"  tool {data['tool']}", palette.warning)
        trial = self.trial_of(ref)
        if trial:
            head.append(f"  trial {trial}", "bold")
        if data.get("model"):
            head.append(f"  {data['model']}", palette.muted)
        parts: list[RenderableType] = [head]
        tokens = (data.get("tokens_in") or 0, data.get("tokens_out") or 0)
        if any(tokens) or data.get("latency_s"):
            parts.append(Text(f"tokens {tokens[0]} in / {tokens[1]} out  latency {data.get('latency_s') or 0:.1f}s  "
                              f"cost ${data.get('cost_usd') or 0:.4f}", palette.muted))
        if data.get("text"):
            parts += [Rule("text", align="left", style=palette.muted), Text(str(data["text"]))]
        if data.get("args") is not None:
            parts += [Rule("call arguments", align="left", style=palette.muted),
                      Syntax(json.dumps(data["args"], indent=2, ensure_ascii=False), "json", theme=palette.syntax_theme(),
                             word_wrap=True)]
        if data.get("result") is not None:
            parts += [Rule("tool result", align="left", style=palette.muted), Text(str(data["result"]))]
        target.update(Group(*parts))
        self.post_message(self.StepShown(index))

    @on(LineTable.Highlighted, "#turns")
    def _highlighted(self, message: LineTable.Highlighted) -> None:
        self._show(message.key)

    @on(LineTable.FollowChanged, "#turns")
    def _follow_changed(self, message: LineTable.FollowChanged) -> None:
        message.table.border_title = "turns · following" if message.following else "turns"

    # ------------------------------------------------------------------ actions

    def action_step(self, step: int) -> None:
        self.query_one("#turns", LineTable).action_cursor(step)

    def action_agent_filter(self) -> None:
        model = self.model
        agents: list[str | None] = [None, *sorted({t.agent for t in model.turns})] if model else [None]
        i = agents.index(self.agent_filter) if self.agent_filter in agents else 0
        self.agent_filter = agents[(i + 1) % len(agents)]
        self.refresh_view([])

    def action_trace(self) -> None:
        """Toggle the trace between every turn and the turns of the current step's trial."""
        if self.trial_filter is not None:
            keep = self.query_one("#turns", LineTable).cursor_key
            self.trial_filter = None
            self.refresh_view([])
            if keep is not None:
                self.query_one("#turns", LineTable).move_to(keep)
            return
        key = self.query_one("#turns", LineTable).cursor_key
        if key is None or self.model is None:
            return
        trial = self.trial_of(self.model.turns[int(key)])
        if trial is None:
            self.notify("this step belongs to no trial yet")
            return
        self.trial_filter = trial
        self.refresh_view([])
        self.query_one("#turns", LineTable).move_to(key)

    def action_goto_trial(self) -> None:
        key = self.query_one("#turns", LineTable).cursor_key
        if key is None or self.model is None:
            return
        trial = self.trial_of(self.model.turns[int(key)])
        if trial is None or trial not in self.state.trials:
            self.notify("this step belongs to no trial yet")
            return
        self.post_message(OpenTrial(self.session, trial))

    def action_search(self) -> None:
        box = self.query_one("#trace-search", Input)
        box.display = True
        box.value = self.query_text
        box.focus()

    @on(Input.Submitted, "#trace-search")
    def _search_submitted(self, message: Input.Submitted) -> None:
        self.query_text = message.value.strip()
        message.input.display = False
        self.query_one("#turns", LineTable).focus()
        self._title()
        if self.query_text:
            self.action_next_match(1)

    def action_next_match(self, direction: int) -> None:
        if not self.query_text:
            self.action_search()
            return
        table = self.query_one("#turns", LineTable)
        self.search(self.query_text, [int(k) for k in table.rows], table.cursor, direction)

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def search(self, query: str, rows: list[int], start: int, direction: int) -> None:
        model = self.model
        if model is None:
            return
        worker = get_current_worker()
        needle = query.lower()
        n = len(rows)
        for step in range(1, n + 1):
            if step % 1024 == 0 and worker.is_cancelled:
                return
            pos = (start + direction * step) % n
            if needle in turn_search_text(model.turn_data(model.turns[rows[pos]])):
                self.post_message(self.SearchDone(query, rows[pos]))
                return
        self.post_message(self.SearchDone(query, None))

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        if message.index is None:
            self.notify(f"no turn matches {message.query!r}", severity="warning")
            return
        self.query_one("#turns", LineTable).move_to(str(message.index))

    def action_back(self) -> None:
        box = self.query_one("#trace-search", Input)
        if box.display:
            box.display = False
            self.query_one("#turns", LineTable).focus()
            return
        self.app.pop_screen()
