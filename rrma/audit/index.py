"""The parts of a run's log the audit reads, by trial: trace turns, blackboard posts.

The folded :class:`~rrma.log.state.RunState` keeps no turn texts, so the audit keeps its own small
index, fed with the same events (the live loop: every event its ledger folds; ``rrma-tui audit``: a
scan of the log). A turn belongs to the trial its ``trial_id`` names; a post without one belongs to
the trial its agent was working on (the trial of that agent's latest turn before it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

TEXT_CHARS = 20_000  # what the rules read of one turn's text, arguments or result


@dataclass(frozen=True, slots=True)
class TurnView:
    seq: int
    agent: str
    role: str
    text: str
    tool: str | None
    args: str  # the call's arguments as text (JSON of the args dict)
    result: str
    trial_id: str | None


@dataclass(frozen=True, slots=True)
class PostView:
    seq: int
    agent: str
    text: str
    trial_id: str | None


class AuditIndex:
    """Turns and posts by trial, and each trial's ``trial.proposed``/``trial.finished`` seqs."""

    def __init__(self) -> None:
        self.turns: dict[str, list[TurnView]] = {}
        self.posts: dict[str, list[PostView]] = {}
        self.loose_posts: list[PostView] = []  # posts no trial can be named for
        self.current: dict[str, str] = {}  # agent -> the trial of its latest turn
        self.proposed_seq: dict[str, int] = {}
        self.finished_seq: dict[str, int] = {}

    def observe(self, event: Any) -> None:
        kind = event.kind
        d = event.data
        if kind == "agent.turn":
            trial = getattr(d, "trial_id", None)
            args = getattr(d, "args", None)
            view = TurnView(seq=event.seq, agent=d.agent, role=d.role, text=(d.text or "")[:TEXT_CHARS],
                            tool=d.tool, args=json.dumps(args, ensure_ascii=False)[:TEXT_CHARS] if args else "",
                            result=(d.result or "")[:TEXT_CHARS], trial_id=trial)
            if trial:
                self.turns.setdefault(trial, []).append(view)
                self.current[d.agent] = trial
        elif kind == "blackboard.post":
            trial = d.trial_id or self.current.get(d.agent)
            post = PostView(seq=event.seq, agent=d.agent, text=d.text[:TEXT_CHARS], trial_id=trial)
            if trial:
                self.posts.setdefault(trial, []).append(post)
            else:
                self.loose_posts.append(post)
        elif kind == "trial.proposed":
            self.proposed_seq[d.trial_id] = event.seq
            self.current.setdefault(d.agent, d.trial_id)
        elif kind == "trial.finished":
            self.finished_seq[d.trial_id] = event.seq

    def turns_of(self, trial_id: str) -> list[TurnView]:
        return self.turns.get(trial_id, [])

    def posts_of(self, trial_id: str) -> list[PostView]:
        return self.posts.get(trial_id, [])
