"""The trace view: an agent's turns one at a time (model text, tool calls, tool results).

Turns are never all loaded: the list is a :class:`LineTable` over indices into the run's turn
index, each visible row and the selected step read from the log with ``pread`` (LRU-cached).
Filters: agent (cycle with ``a``) and trial (``t`` toggles the trial of the current step). An
audit finding opens it on the turn it cites (the trial view's Enter on a finding). A
trial's turns are those that name it plus, for turns that name no trial, the same agent's turns
since its previous proposal (what the agent did on the way to that proposal). Search runs in a
worker over the filtered turns: it counts every match ("3 of 12" in the title), ``n``/``N`` move
between them and the matches are highlighted in the list and the detail.

The detail pane (tui.widgets.turn_view) draws a tool call and its result as one block, gives each
step its time and the time since the agent's previous turn (or the model's latency), the step's
tokens and cost with its trial's and its agent's totals, renders the agent's prose as markdown,
and collapses long texts to their first lines (``space`` the step under the cursor, ``e``/``z``
every step).

The list follows a live run (LineTable's follow mode): while the cursor is on the last turn,
new turns keep it there and the detail shows the newest step; moving off it stops that, ``End``
resumes. Colours come from the app's theme (tui.palette) and change with it.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.markdown import Markdown
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

from rrma.log.codec import LogEvent
from rrma.log.turns import TurnRef
from tui.messages import OpenTrial
from tui.palette import Palette, Tone, palette_of
from tui.screens.base import RunScreen
from tui.session import RunSession
from tui.widgets.footer import KeysFooter
from tui.widgets.line_table import Column, LineTable
from tui.widgets.turn_view import (
    clip,
    clock,
    collapse,
    duration,
    highlighted,
    logprob_table,
    matches_in,
    more_line,
    pair_of,
    previous_of_agent,
    sampled,
    sampled_summary,
    search_pattern,
    seconds_between,
    tool_only_line,
    usage,
)

TURN_COLUMNS = [
    Column("seq", "seq", 7, "right", drop=5), Column("agent", "agent", 10, drop=2), Column("role", "role", 11),
    Column("tool", "tool", 10, drop=3), Column("trial", "trial", 7, drop=4), Column("time", "time", 8, drop=6),
    Column("text", "text", 0, drop=1),
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
        Binding("space", "toggle_node", "Fold"),  # space folds/unfolds what is under the cursor (as in the lineage)
        Binding("e", "expand_all", "Expand all"),
        Binding("z", "collapse_all", "Collapse all"),
        Binding("number_sign", "logprobs", "Logprobs", key_display="#"),  # a sampled model's per-token logprobs
        # the detail pane scrolls from the list (Tab also focuses it): half a pane a press
        Binding("J", "scroll_detail(1)", "Detail: scroll down", show=False),
        Binding("K", "scroll_detail(-1)", "Detail: scroll up", show=False),
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
        index: int | None  # turn index of the match to go to, None if none
        matches: list[int] = field(default_factory=list)  # turn indices of every matching step, in list order
        rows: int = 0  # how many rows were searched (a search of an older list is redone)
        move: bool = True  # go to ``index`` (False: a recount after the list changed)

    def __init__(self, session: RunSession, *, agent: str | None = None, trial_id: str | None = None,
                 cited: tuple[int, ...] = ()) -> None:
        super().__init__(session)
        self.agent_filter = agent
        self.trial_filter = trial_id
        self.cited = list(cited)  # an audit finding's cited seqs, until the cursor is on the turn they point at
        self.query_text = ""
        self.matches: list[int] | None = None  # turn indices of the steps that match the query (None: not counted)
        self._match_rows: dict[int, int] = {}  # turn index -> its position among the matches
        self.expanded: set[int] = set()  # steps shown whole (the call's index for a call and its result)
        self.all_expanded = False  # `e`: every step whole (until `z`); `space` then collapses single steps
        self.collapsed: set[int] = set()  # steps folded by `space` while all are expanded
        self._trial_usage: dict[str, tuple[int, int, int, float]] = {}  # trial -> (turns seen, in, out, cost)
        self._proposals: dict[str, list[tuple[int, str]]] = {}
        self._palette: Palette | None = None
        self._shown_key: str | None = None  # the step in the detail pane
        self.show_logprobs = False  # `#`: a sampled reply's per-token logprobs under it

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
        table.border_subtitle = "/ search · n N matches · space fold · t this trial"
        self.query_one("#turn-detail", VerticalScroll).border_subtitle = "J/K scroll · Tab focus"
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
        agent = self.agent_filter
        if self.trial_filter is None:
            return [i for i, t in enumerate(model.turns) if agent is None or t.agent == agent]
        return self._turns_of_trial(self.trial_filter, agent)

    def _turns_of_trial(self, trial: str, agent: str | None = None) -> list[int]:
        """Indices of the turns of a trial: those naming it, and its agent's unnamed turns since its previous proposal."""
        model = self.model
        if model is None:
            return []
        rec = self.state.trials.get(trial)
        lo = -1
        if rec is not None:
            props = self._proposals.get(rec.agent, [])
            i = bisect.bisect_left(props, (rec.proposed_seq, ""))
            lo = props[i - 1][0] if i > 0 else -1
        out = []
        for i, t in enumerate(model.turns):
            if agent is not None and t.agent != agent:
                continue
            if t.trial_id == trial or (rec is not None and t.trial_id is None and t.agent == rec.agent
                                       and t.indexed and lo < t.seq <= rec.proposed_seq):
                out.append(i)
        return out

    def refresh_view(self, events: list[LogEvent]) -> None:
        if events and not any(e.kind in ("agent.turn", "trial.proposed") for e in events):
            return
        self._proposals = self._proposal_index()
        table = self.query_one("#turns", LineTable)
        table.live_end = "bottom" if self.trial_filter is None else None  # a trial's turns are history
        rows = [str(i) for i in self.filtered()]
        old = table.rows
        grown = len(rows) >= len(old) and rows[:len(old)] == old  # new turns at the end (a live run)
        changed = rows != old
        table.set_rows(rows)
        if changed and self.query_text:  # count the matches again (in a worker) without moving
            known = self.matches if grown and self.matches is not None else None
            self.matches = None
            self.search(self.query_text, [int(k) for k in rows], table.cursor, 1, move=False,
                        known=known, skip=len(old) if known is not None else 0)
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
            text.append(f"  /{self.query_text} ", self.palette.warning)
            text.append(self._match_count(), self.palette.warning + Style(bold=True))
        if model is not None and not model.turns_indexed:
            text.append("  (indexing turns…)", muted)
        self.query_one("#trace-title", Static).update(text)

    # ------------------------------------------------------------------ drawing

    def _match_count(self) -> str:
        """'3 of 12' on the 3rd match, '12 matches' between them, 'counting…' until the worker is done."""
        if self.matches is None:
            return "counting…"
        if not self.matches:
            return "no match"
        key = self.query_one("#turns", LineTable).cursor_key
        at = self._match_rows.get(int(key)) if key is not None else None
        n = len(self.matches)
        return f"{at + 1} of {n}" if at is not None else f"{n} match{'es' if n != 1 else ''}"

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
        if role == "tool_result":  # its output (a failed tool's marked), not the "error" flag in its text
            body = ("✗ " if data.get("text") == "error" else "") + str(data.get("result") or data.get("text") or "")
        elif role == "assistant" and (calls := tool_only_line(data)) is not None:
            body = calls  # a message of tool calls only: the calls, not its {"stop_reason": ...} bookkeeping
        else:
            body = (data.get("text") or data.get("result") or (json.dumps(data.get("args")) if data.get("args") else "") or "")
        first = str(body).strip().splitlines()[0] if str(body).strip() else ""
        pattern = search_pattern(self.query_text)
        shown: str | Text = highlighted(first, pattern, self._match_style()) if pattern is not None else first
        return [str(ref.seq), ref.agent, Text(role, self.role_style(role)), ref.tool or "", self.trial_of(ref) or "",
                clock(ref.ts), shown]

    def action_scroll_detail(self, direction: int) -> None:
        """J / K: scroll the detail pane by half its height, the cursor staying in the list."""
        detail = self.query_one("#turn-detail", VerticalScroll)
        detail.scroll_relative(y=direction * max(1, detail.scrollable_content_region.height // 2), animate=False)

    def _match_style(self) -> Style:
        return self.palette.warning + Style(reverse=True, bold=True)

    def _is_expanded(self, anchor: int) -> bool:
        return anchor not in self.collapsed if self.all_expanded else anchor in self.expanded

    def _anchor(self, index: int) -> int:
        """The step a turn's fold belongs to: a tool call and its result fold together (the call's index)."""
        model = self.model
        if model is None or model.turns[index].role != "tool_result":
            return index
        call = pair_of(model.turns, index)
        return call if call is not None else index

    def _trial_totals(self, trial: str) -> tuple[int, int, int, float]:
        """(turns, tokens in, tokens out, cost) of a trial's turns (those ``t`` lists), cached per trace length."""
        model = self.model
        assert model is not None
        seen = len(model.turns)
        hit = self._trial_usage.get(trial)
        if hit is not None and hit[0] == seen:
            return hit
        tin = tout = n = 0
        cost = 0.0
        for i in self._turns_of_trial(trial):
            data = model.turn_data(model.turns[i])
            n += 1
            tin += int(data.get("tokens_in") or 0)
            tout += int(data.get("tokens_out") or 0)
            cost += float(data.get("cost_usd") or 0.0)
        self._trial_usage[trial] = (seen, tin, tout, cost)
        return seen, tin, tout, cost

    def _text_block(self, label: str, body: str, anchor: int, *, markdown: bool = False,
                    style: Style | str = "") -> list[RenderableType]:
        """A labelled text, collapsed unless its step is expanded, matches highlighted (prose as markdown)."""
        palette = self.palette
        pat = search_pattern(self.query_text)
        expanded = self._is_expanded(anchor)
        lines, hidden = collapse(body, expanded)
        shown, hidden_chars = clip(lines, expanded)
        parts: list[RenderableType] = [Rule(label, align="left", style=palette.muted)]
        if markdown and not matches_in(shown, pat):
            parts.append(Markdown(shown, code_theme="ansi_dark" if palette.dark else "ansi_light", hyperlinks=False))
        else:
            parts.append(highlighted(shown, pat, self._match_style(), style))
        if hidden or hidden_chars:
            rest = lines[len(shown):].splitlines() + (body.splitlines()[-hidden:] if hidden else [])
            parts.append(more_line(hidden, sum(matches_in(line, pat) for line in rest), palette.muted, hidden_chars))
        return parts

    def _json_block(self, label: str, value: object, anchor: int) -> list[RenderableType]:
        text = json.dumps(value, indent=2, ensure_ascii=False)
        pat = search_pattern(self.query_text)
        shown, hidden = collapse(text, self._is_expanded(anchor))
        if matches_in(shown, pat) or hidden or clip(shown, self._is_expanded(anchor))[1]:
            return self._text_block(label, text, anchor)
        return [Rule(label, align="left", style=self.palette.muted),
                Syntax(shown, "json", theme=self.palette.syntax_theme(), word_wrap=True)]

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
        turns = model.turns
        ref = turns[index]
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
        parts: list[RenderableType] = [head, self._when(index)]
        parts += self._usage_lines(ref, data, trial)
        other = pair_of(turns, index)
        anchor = self._anchor(index)
        if role in ("tool_call", "tool_result"):
            call_i, result_i = (index, other) if role == "tool_call" else (other, index)
            call = model.turn_data(turns[call_i]) if call_i is not None else None
            result = model.turn_data(turns[result_i]) if result_i is not None else None
            tool = str((call or result or {}).get("tool") or "?")
            if call is not None:
                label = f"call {tool}"
                if call.get("args") is not None:
                    parts += self._json_block(label, call["args"], anchor)
                else:
                    parts.append(Rule(f"{label} (no arguments)", align="left", style=palette.muted))
                if call.get("text"):
                    parts += self._text_block("call error" if call.get("args", {}).get("raw") is not None else "call note",
                                              str(call["text"]), anchor, style=palette.error)
            else:
                parts.append(Text("(the call is not in this trace)", palette.muted))
            if result is not None:
                failed = str(result.get("text") or "") == "error"
                when = ""
                if call_i is not None and result_i is not None:
                    gap = seconds_between(turns[call_i].ts, turns[result_i].ts)
                    when = f" · {duration(gap)}" if gap is not None else ""  # how long the tool took
                label = f"result{' (error)' if failed else ''}{when}"
                parts += self._text_block(label, str(result.get("result") or ""), anchor,
                                          style=palette.error if failed else "")
                if result.get("text") and not failed:
                    parts += self._text_block("result note", str(result["text"]), anchor)
                if result.get("args") is not None:  # what the tool reported about its run (exit code, status)
                    parts += self._json_block("result details", result["args"], anchor)
            else:
                parts.append(Rule("result", align="left", style=palette.muted))
                parts.append(Text("(no result recorded yet)", palette.muted))
        elif (tokens := sampled(data.get("args"))) is not None:
            parts += self._sampled_blocks(data, tokens, anchor)
        else:
            if data.get("text"):
                label = {"assistant": "said", "user": "prompt", "system": "system prompt", "error": "error"}.get(role, "text")
                parts += self._text_block(label, str(data["text"]), anchor, markdown=role == "assistant",
                                          style=palette.error if role == "error" else "")
            if data.get("result") is not None:
                parts += self._text_block("result", str(data["result"]), anchor)
            if data.get("args") is not None:  # e.g. an assistant turn's stop reason and the tools it called
                parts += self._json_block("details", data["args"], anchor)
        target.update(Group(*parts))
        self.post_message(self.StepShown(index))

    def _sampled_blocks(self, data: dict[str, object], tokens: tuple[list[int], list[float]],
                        anchor: int) -> list[RenderableType]:
        """A sampled model's reply (policy, local): the reply as text (collapsed), a line on its tokens, the
        per-token logprobs when ``#`` asks for them, the prompt it was given (collapsed), the other details."""
        ids, logprobs = tokens
        args = data.get("args")
        assert isinstance(args, dict)
        muted = self.palette.muted
        parts = self._text_block("said", str(data.get("text") or ""), anchor)
        parts.append(Text.assemble((sampled_summary(ids, logprobs, args), muted),
                                   ("  (# hides the logprobs)" if self.show_logprobs else "  (# shows each token's logprob)",
                                    muted + Style(italic=True))))
        if self.show_logprobs:
            parts += [Rule("logprobs (token id: log-probability)", align="left", style=muted),
                      Text(logprob_table(ids, logprobs))]
        prompt = args.get("messages")
        if isinstance(prompt, list) and prompt:
            body = "\n\n".join(f"[{m.get('role', '?')}]\n{m.get('content', '')}" for m in prompt if isinstance(m, dict))
            parts += self._text_block(f"prompt ({len(prompt)} messages)", body, anchor)
        rest = {k: v for k, v in args.items() if k not in ("completion_ids", "logprobs", "messages")}
        if rest:
            parts += self._json_block("details", rest, anchor)
        return parts

    def _when(self, index: int) -> Text:
        """The step's time, the time since the agent's previous turn, and the model's latency if recorded."""
        model = self.model
        assert model is not None
        ref = model.turns[index]
        muted = self.palette.muted
        out = Text.assemble(("at ", muted), clock(ref.ts))
        before = previous_of_agent(model.turns, index)
        gap = seconds_between(before.ts, ref.ts) if before is not None else None
        if gap is not None:
            out.append_text(Text.assemble(("  +", muted), duration(gap), (" since the agent's previous turn", muted)))
        latency = model.turn_data(ref).get("latency_s")
        if latency:
            out.append_text(Text.assemble(("  latency ", muted), duration(float(latency))))
        return out

    def _usage_lines(self, ref: TurnRef, data: dict[str, object], trial: str | None) -> list[RenderableType]:
        """This step's tokens and cost, then its trial's and its agent's totals."""
        muted = self.palette.muted
        out = Text()
        tin, tout = int(data.get("tokens_in") or 0), int(data.get("tokens_out") or 0)  # type: ignore[call-overload]
        cost = float(data.get("cost_usd") or 0.0)  # type: ignore[arg-type]
        if tin or tout or cost:
            out.append_text(Text.assemble(("tokens ", muted), usage(tin, tout, cost)))
        lines: list[RenderableType] = [out] if out.plain else []
        if trial:
            _, t_in, t_out, t_cost = self._trial_totals(trial)
            lines.append(Text.assemble((f"trial {trial}: ", muted), usage(t_in, t_out, t_cost)))
        agent = self.state.agents.get(ref.agent)
        if agent is not None:
            lines.append(Text.assemble((f"agent {ref.agent}: ", muted),
                                       usage(agent.tokens_in, agent.tokens_out, agent.cost_usd)))
        return lines

    @on(LineTable.Highlighted, "#turns")
    def _highlighted(self, message: LineTable.Highlighted) -> None:
        self._show(message.key)
        if self.query_text:
            self._title()  # "3 of 12" follows the cursor

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
        table = self.query_one("#turns", LineTable)
        table.focus()
        self.matches = None
        self._match_rows = {}
        table.refresh_rows()  # highlights in the list
        self._title()
        self._show(table.cursor_key)
        if self.query_text:
            self.search(self.query_text, [int(k) for k in table.rows], table.cursor, 1)

    def action_next_match(self, direction: int) -> None:
        if not self.query_text:
            self.action_search()
            return
        table = self.query_one("#turns", LineTable)
        if self.matches is None:  # still counting, or the list changed: search again and go
            self.search(self.query_text, [int(k) for k in table.rows], table.cursor, direction)
            return
        if not self.matches:
            self.notify(f"no turn matches {self.query_text!r}", severity="warning")
            return
        positions = [table.index_of(str(i)) for i in self.matches]
        here = table.cursor
        if direction > 0:
            after = [p for p in positions if p is not None and p > here]
            target = after[0] if after else positions[0]
        else:
            before = [p for p in positions if p is not None and p < here]
            target = before[-1] if before else positions[-1]
        if target is not None:
            table.move_to(table.rows[target])
            self._title()

    @work(thread=True, exclusive=True, group="search", exit_on_error=False)
    def search(self, query: str, rows: list[int], start: int, direction: int, move: bool = True,
               known: list[int] | None = None, skip: int = 0) -> None:
        """Every step of ``rows`` that matches (a tool call with its result); the first after ``start`` to go to.
        ``known``: the matches among ``rows[:skip]``, searched before (a live trace only searches its new turns)."""
        model = self.model
        if model is None:
            return
        worker = get_current_worker()
        needle = query.lower()
        matches: list[int] = list(known or [])
        positions: list[int] = []
        if matches:
            where = {i: pos for pos, i in enumerate(rows[:skip])}
            positions = [where[i] for i in matches]
        for pos, i in enumerate(rows[skip:], skip):
            if pos % 512 == 0 and worker.is_cancelled:
                return
            ref = model.turns[i]
            text = turn_search_text(model.turn_data(ref))
            if needle not in text and ref.role in ("tool_call", "tool_result"):  # the block shows both halves
                other = pair_of(model.turns, i)
                if other is not None:
                    text = turn_search_text(model.turn_data(model.turns[other]))
            if needle in text:
                matches.append(i)
                positions.append(pos)
        target = None
        if positions:
            if direction > 0:
                k = bisect.bisect_right(positions, start)
                target = matches[k % len(matches)]
            else:
                k = bisect.bisect_left(positions, start) - 1
                target = matches[k]
        self.post_message(self.SearchDone(query, target, matches, len(rows), move))

    @on(SearchDone)
    def _search_done(self, message: SearchDone) -> None:
        if message.query != self.query_text:
            return
        self.matches = message.matches
        self._match_rows = {i: n for n, i in enumerate(message.matches)}
        if message.index is None:
            self._title()
            if message.move:
                self.notify(f"no turn matches {message.query!r}", severity="warning")
            return
        if message.move:
            self.query_one("#turns", LineTable).move_to(str(message.index))
        self._title()

    # ------------------------------------------------------------------ folding

    def action_toggle_node(self) -> None:
        """Expand or collapse the step under the cursor (a tool call and its result together)."""
        key = self.query_one("#turns", LineTable).cursor_key
        if key is None:
            return
        anchor = self._anchor(int(key))
        if self.all_expanded:
            self.collapsed ^= {anchor}
        else:
            self.expanded ^= {anchor}
        self._show(key)

    def action_expand_all(self) -> None:
        self.all_expanded, self.collapsed, self.expanded = True, set(), set()
        self._show(self.query_one("#turns", LineTable).cursor_key)

    def action_collapse_all(self) -> None:
        self.all_expanded, self.collapsed, self.expanded = False, set(), set()
        self._show(self.query_one("#turns", LineTable).cursor_key)

    def action_logprobs(self) -> None:
        """Show or hide the per-token logprobs of a sampled model's reply (every such step alike)."""
        self.show_logprobs = not self.show_logprobs
        self._show(self.query_one("#turns", LineTable).cursor_key)

    def action_back(self) -> None:
        box = self.query_one("#trace-search", Input)
        if box.display:
            box.display = False
            self.query_one("#turns", LineTable).focus()
            return
        self.app.pop_screen()
