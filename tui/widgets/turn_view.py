"""What the trace's detail pane draws for one step: pure helpers (no widget state).

A step is one agent turn, except that a tool call and its result are one block (Inspect AI's
viewer does the same): the call's tool and arguments, then the result, whichever of the two the
cursor is on. :func:`pair_of` finds the other half by the agent's order of turns (the first
result after a call that no earlier open call of the same agent takes, as rrma.audit.rules
pairs them). Long texts are collapsed to their first :data:`COLLAPSED_LINES` lines (and at most
:data:`COLLAPSED_CHARS` characters: a model's rambling reply may be one long line) with a ``… N more
lines`` line; search matches are highlighted in whatever is drawn. A sampled model's reply (the
``policy`` and ``local`` backends record the sampled token ids and their logprobs) gets a one-line
summary of its tokens (:func:`sampled_summary`) and its per-token logprobs on demand (:func:`logprob_table`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.style import Style
from rich.text import Text

from rrma.log.events import parse_ts
from rrma.log.turns import TurnRef
from tui.counts import token_count

COLLAPSED_LINES = 12  # lines of a long text shown while its step is collapsed
COLLAPSED_CHARS = 1200  # characters of a long text shown while its step is collapsed (about 12 wrapped lines)
LOGPROBS_PER_LINE = 6  # tokens per line of the logprob table
PAIR_WINDOW = 400  # turns looked through for a call's result (or a result's call)


def pair_of(turns: Sequence[TurnRef], index: int) -> int | None:
    """The index of the result of the tool call at ``index`` (or of the call of the result there).

    Only the same agent's turns count, and only up to its next model reply or prompt (an
    ``assistant``/``user``/``system`` turn): calls and results pair in order, first in first out.
    None if the turn is neither, if the other half is not (yet) in the trace, or is not indexed.
    """
    ref = turns[index]
    if ref.role not in ("tool_call", "tool_result"):
        return None
    forward = ref.role == "tool_call"
    step, mine, other = (1, "tool_call", "tool_result") if forward else (-1, "tool_result", "tool_call")
    open_ = 0
    i = index + step
    end = min(len(turns), index + PAIR_WINDOW) if forward else max(-1, index - PAIR_WINDOW)
    while i != end:
        t = turns[i]
        i += step
        if t.agent != ref.agent:
            continue
        if t.role is None or t.role in ("assistant", "user", "system"):
            return None
        if t.role == mine:
            open_ += 1
        elif t.role == other:
            if open_ == 0:
                return i - step
            open_ -= 1
    return None


def previous_of_agent(turns: Sequence[TurnRef], index: int, window: int = PAIR_WINDOW) -> TurnRef | None:
    """The same agent's turn before the one at ``index`` (within ``window`` turns of the trace)."""
    agent = turns[index].agent
    for i in range(index - 1, max(-1, index - window), -1):
        if turns[i].agent == agent:
            return turns[i]
    return None


def clock(ts: str) -> str:
    """HH:MM:SS of an event's ISO timestamp (the text as it is if it is not one)."""
    when = parse_ts(ts)
    return when.strftime("%H:%M:%S") if when is not None else ts


def seconds_between(earlier: str, later: str) -> float | None:
    a, b = parse_ts(earlier), parse_ts(later)
    return (b - a).total_seconds() if a is not None and b is not None else None


def duration(seconds: float) -> str:
    """1.25 -> '1.2s', 75 -> '1m15s', 3725 -> '1h02m'."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


def usage(tokens_in: float, tokens_out: float, cost: float) -> str:
    return f"{token_count(tokens_in)} in / {token_count(tokens_out)} out, ${cost:.4f}"


def search_pattern(query: str) -> re.Pattern[str] | None:
    return re.compile(re.escape(query), re.IGNORECASE) if query else None


def matches_in(text: str, pattern: re.Pattern[str] | None) -> int:
    return len(pattern.findall(text)) if pattern is not None else 0


def collapse(text: str, expanded: bool, limit: int = COLLAPSED_LINES) -> tuple[str, int]:
    """(what to show, lines hidden): the first ``limit`` lines of a longer text unless ``expanded``."""
    lines = text.splitlines()
    if expanded or len(lines) <= limit + 1:  # hiding one line saves nothing: its "more" line takes its place
        return text, 0
    return "\n".join(lines[:limit]), len(lines) - limit


def clip(shown: str, expanded: bool, limit: int = COLLAPSED_CHARS) -> tuple[str, int]:
    """(what to show, characters hidden): at most ``limit`` characters of what :func:`collapse` left, cut
    at a line end or a space near the limit, unless ``expanded``."""
    if expanded or len(shown) <= limit + limit // 10:  # hiding a little saves nothing
        return shown, 0
    cut = max(shown.rfind("\n", limit // 2, limit), shown.rfind(" ", limit // 2, limit))
    cut = cut if cut > 0 else limit
    return shown[:cut], len(shown) - cut


def more_line(hidden: int, hidden_matches: int, muted: Style, hidden_chars: int = 0) -> Text:
    said = []
    if hidden_chars:
        said.append(f"{token_count(hidden_chars)} more character{'s' if hidden_chars != 1 else ''}")
    if hidden:
        said.append(f"{hidden} more line{'s' if hidden != 1 else ''}")
    words = "… " + " and ".join(said)
    if hidden_matches:
        words += f" ({hidden_matches} match{'es' if hidden_matches != 1 else ''} in them)"
    return Text(words + "  (space expands)", muted + Style(italic=True))


def highlighted(text: str, pattern: re.Pattern[str] | None, style: Style, base: Style | str = "") -> Text:
    out = Text(text, base)
    if pattern is not None:
        for m in pattern.finditer(text):
            out.stylize(style, m.start(), m.end())
    return out


def sampled(args: object) -> tuple[list[int], list[float]] | None:
    """The sampled token ids and their logprobs a model reply recorded (``policy``/``local``), else None."""
    if not isinstance(args, dict):
        return None
    ids, logprobs = args.get("completion_ids"), args.get("logprobs")
    if not (isinstance(ids, list) and isinstance(logprobs, list) and ids and len(ids) == len(logprobs)):
        return None
    try:
        return [int(i) for i in ids], [float(x) for x in logprobs]
    except (TypeError, ValueError):
        return None


def sampled_summary(ids: Sequence[int], logprobs: Sequence[float], args: dict[str, object]) -> str:
    """One line: how many tokens were sampled, their mean and lowest logprob, the prompt's length and cut."""
    finite = [(x, i) for i, x in enumerate(logprobs) if x == x and x not in (float("inf"), float("-inf"))]
    words = [f"sampled {len(ids)} token{'s' if len(ids) != 1 else ''}"]
    if finite:
        low, at = min(finite)
        words.append(f"logprob mean {sum(x for x, _ in finite) / len(finite):.2f}, lowest {low:.2f} (token {at + 1})")
    cut = args.get("prompt_truncated_tokens")
    if isinstance(cut, int) and cut:
        words.append(f"prompt cut by {cut} tokens")
    return " · ".join(words)


def logprob_table(ids: Sequence[int], logprobs: Sequence[float], per_line: int = LOGPROBS_PER_LINE) -> str:
    """Each sampled token as ``#n id:logprob``, ``per_line`` to a line (the ids are the model's vocabulary)."""
    cells = [f"#{n + 1:<3} {i:>6}:{x:7.3f}" for n, (i, x) in enumerate(zip(ids, logprobs, strict=True))]
    return "\n".join("   ".join(cells[k:k + per_line]) for k in range(0, len(cells), per_line))


def tool_only_line(data: dict[str, object]) -> str | None:
    """The row of an assistant message that carries no text, only tool calls: ``→ read_file, run_command``
    (what it asked for), not its bookkeeping (``{"stop_reason": null, ...}``); None: it has text, or is no such
    message."""
    if str(data.get("text") or "").strip():
        return None
    args = data.get("args")
    calls = args.get("tool_calls") if isinstance(args, dict) else None
    if isinstance(calls, list) and calls:
        return "→ " + ", ".join(str(c) for c in calls)
    stop = args.get("stop_reason") if isinstance(args, dict) else None
    return f"(no text, no tool call; stop: {stop})" if isinstance(args, dict) and "stop_reason" in args else None
