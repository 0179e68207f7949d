"""What Coq prints, read: goals, ``Print Assumptions``, errors and ``coqtop``'s prompts.

Why apart: the cold checker, the warm sessions and the proof-state backend read the same output; the
parsing is pure, so it is tested on Coq's own text. Invariant: :func:`parse_assumptions` reports
``closed`` only for "Closed under the global context" or section variables; anything it cannot read
is a problem, never a pass.
"""

from __future__ import annotations

import re

_INFOMSG = re.compile(r"</?infomsg>")
PROMPT = re.compile(r"<prompt>(.*?)</prompt>", re.S)
PROMPT_FIELDS = re.compile(r"^\s*(\S+) < (\d+) \|")


def clean_reply(text: str) -> str:
    text = _INFOMSG.sub("", text).replace("\r\n", "\n")
    return "\n".join(line for line in text.split("\n") if not line.startswith("Fetching opaque proofs"))


def parse_goals(text: str) -> list[str]:
    """Goals from Coq's goal display (``Show.`` or a tactic's echo): the first with hypotheses."""
    text = clean_reply(PROMPT.sub("", text))
    if "No more goals" in text and "====" not in text:
        return []
    goals: list[str] = []
    first = re.search(r"\d+ goals?(?: \(ID \d+\))?\n(.*?)\n\s*=+\n(.*?)(?:\n\n|\Z)", text, re.S)
    if first:
        hyps = [h.strip() for h in first.group(1).strip("\n").split("\n") if h.strip()]
        concl = " ".join(first.group(2).split())
        goals.append(("; ".join(hyps) + " |- " if hyps else "|- ") + concl)
    for match in re.finditer(r"goal \d+(?: \(ID \d+\))? is:\n(.*?)(?:\n\n|\Z)", text, re.S):
        goals.append("|- " + " ".join(match.group(1).split()))
    return goals


def parse_assumptions(text: str) -> tuple[bool, list[str], str]:
    """(closed, axiom names, problem) from ``Print Assumptions`` output.

    ``closed`` is True for "Closed under the global context" and for section variables only.
    Any other section header (axioms, guard/positivity assumptions) lists what it relies on.
    """
    text = clean_reply(PROMPT.sub("", text)).strip()  # a warm reply ends with coqtop's prompt line
    if text.startswith("Closed under the global context"):
        return True, [], ""
    axioms: list[str] = []
    problem = ""
    section = ""
    for line in text.split("\n"):
        if not line.strip():
            continue
        if re.match(r"^[A-Z][A-Za-z ]+:$", line.strip()) and not line.startswith(" "):
            section = line.strip()[:-1]
            if section not in ("Section Variables", "Axioms"):
                problem = problem or f"Print Assumptions lists {section}"
            continue
        if section == "Axioms" and not line[0].isspace() and not line.startswith(":"):
            axioms.append(line.split(" ", 1)[0].strip())
        elif section not in ("Section Variables", "Axioms") and not problem:
            problem = f"Print Assumptions is not closed: {line.strip()[:120]}"
    if not section:
        return False, axioms, f"unexpected Print Assumptions output: {text[:200]}"
    return not axioms and not problem, axioms, problem


AXIOMS_REASON = "Print Assumptions not closed: relies on axiom(s) "
COQ_NAME = re.compile(r"[A-Za-z_][\w']*(?:\.[A-Za-z_][\w']*)*")


def located_constant(text: str, name: str = "") -> str | None:
    """The full name ``Locate X.`` printed for the constant ``X`` denotes (``N.zero`` for a functor
    parameter's field, ``Coq.Logic.Classical_Prop.classic``); None when it names no constant. ``Locate`` reads
    a name as any path's suffix: with ``name`` unqualified, a constant it prints with a shorter name to refer to
    it by (``Z.opp_max_distr`` for ``opp_max_distr`` where ``Z`` is not imported) is none ``name`` denotes."""
    m = re.search(r"^Constant\s+(?P<path>[\w'.]+)(?P<shorter>\s*\(shorter name to refer to it)?",
                  clean_reply(PROMPT.sub("", text)), re.M)
    if m is None or (name and "." not in name and m.group("shorter")):
        return None
    return m.group("path")


def axiom_verdict(closed: bool, axioms: list[str], problem: str, allowed: tuple[str, ...]) -> tuple[bool, str]:
    if problem:
        return False, problem
    bad = [a for a in axioms if a not in allowed and a.split(".")[-1] not in allowed]
    if bad:
        return False, f"{AXIOMS_REASON}{', '.join(bad)}"
    return True, "accepted"


def error_summary(text: str) -> str:
    """One line of at most 200 characters: the error message without its ``Error:`` prefix."""
    flat = " ".join(text.split())
    return (flat[len("Error:") :] if flat.startswith("Error:") else flat).strip()[:200]


def errors_of(text: str) -> list[str]:
    """Error messages in a cleaned coqtop reply (each with its location lines dropped)."""
    out = []
    for part in re.split(r"<prompt>.*?</prompt>", text, flags=re.S):
        idx = part.find("Error:")
        if idx >= 0 and (idx == 0 or part[idx - 1] == "\n"):
            out.append(part[idx:].strip())
    return out


