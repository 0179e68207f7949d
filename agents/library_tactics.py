"""Tactics learnt from the human proofs of the target's library: Tactician-style k-NN over goals.

Why it exists: a prover that learns only from the proofs it found itself in a run starts every
file knowing nothing. The files a target depends on hold thousands of human proofs, each step a
(goal, tactic) pair; a goal like the current one was often closed by a tactic that works here too
(Tactician's k-nearest-neighbour idea). This module builds such pairs offline and proposes, for a
goal, the tactics of the most similar recorded goals.

Two halves:

* the **index** (:func:`index_file`, ``python -m agents.library_tactics build FILE...``): every
  ``.v`` file is run sentence by sentence in ``coqtop``; for every tactic of every proof the first
  goal before it (hypotheses and conclusion as Coq prints them) and the tactic are recorded, with
  the file's own lemma names fully qualified (``Coq.Arith.PeanoNat.Nat.add_comm``) so that the
  tactic names the same lemma from another file's scope. One JSON file per module, under
  :func:`cache_dir` (``$XDG_CACHE_HOME/rrma/coq-tactics/<Coq version>/``), keyed by the source's
  hash; nothing needs it prebuilt (a module without an entry contributes nothing).
* the **suggester** (:class:`LibraryTactics`, a ``TacticSuggester``): goal features (the
  conclusion's global symbols, their adjacent pairs, its head, the hypotheses' symbols; local
  names dropped), TF-IDF weights, an inverted index; for a goal the tactics of the ``k`` nearest
  recorded goals (nearest first; :func:`proposal_order`, a vote, is measured and off), local names
  mapped onto the current goal's hypotheses, best first. At the
  statement it also proposes the whole proofs of the most similar library statements.

The rule (what "the target's library" is), enforced by :func:`library_modules`: the modules loaded
in the agent's own session after the theorem's context (``Print Libraries``), which is the
session the checker also runs in, less any module that holds the target itself. The checker
refuses a session with the target's module loaded, and a module that depends on the target cannot
be loaded without it, so neither the target file's proofs nor those of a file that comes after it
are ever in that set. As a second guard, a module whose index holds a theorem with the target's
name and statement is left out (:func:`holds_target`), whatever the session says. In the
``rediscover`` setting this is the only source of human proofs; the target file's own proofs are
never indexed from its context (the view has them as ``Admitted``).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from agents.premises import coq_file_premises, tokens
from agents.tactic_suggester import Candidate
from oracle.proof_common import TheoremTask
from oracle.proof_state import ProofState
from oracle.proof_state_coq import CoqGoal, parse_coq_goals
from oracle.strip_coq import CoqSyntaxError, split_sentences

INDEX_VERSION = 2  # 2: each file runs as its own module (round nine)
MAX_ERRORS = 20  # a file that fails this often is given up (what ran is kept)
GOAL_CHARS = 1500  # a recorded goal's display is clipped to this
_IDENT = re.compile(r"[A-Za-z_][\w'.]*[\w']|[A-Za-z_]")
_BINDER = re.compile(r"(?:forall|exists|fun|∀|∃|λ)\s+([^,]*?)\s*(?:,|=>)")
_PROOF_END = re.compile(r"^(?:Qed|Defined|Admitted|Abort(?:\s+All)?|Save\s+\S+)\s*\.$")
_OPENS = re.compile(r"^(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global|Program|Polymorphic|Monomorphic)\s+)*"
                    r"(?:Theorem|Lemma|Example|Fact|Remark|Corollary|Proposition|Property|Goal|Definition|"
                    r"Fixpoint|CoFixpoint|Instance|Let|Next\s+Obligation)\b")
_SKIP_STEP = re.compile(r"^(?:[-+*]+|[{}]|Proof(?:\s.*)?\.|Show.*|Time\s.*|Focus.*|Unfocus.*)$", re.S)


@dataclass(frozen=True)
class LibraryStep:
    """One step of a human proof: the first goal before it and the tactic that was run there."""

    module: str
    theorem: str
    goal: str  # display ``h1 : T1; h2 : T2 |- concl`` (as :class:`~oracle.proof_state_coq.CoqGoal`)
    tactic: str
    locals: tuple[str, ...] = ()  # the goal's hypothesis names (the names a tactic may mention)


@dataclass(frozen=True)
class LibraryProof:
    """A whole human proof of the library, for a statement like it (tried at the statement)."""

    module: str
    theorem: str
    statement: str
    proof: str  # sentences, one per line, own names qualified


# ----------------------------------------------------------------------------- where the index lives


def coq_version() -> str:
    """``8.16.1`` (from ``coqc --version``): the index is only valid for the Coq that built it."""
    try:
        out = subprocess.run(["coqc", "--version"], capture_output=True, text=True, timeout=60, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"version\s+(\S+)", out)
    return m.group(1) if m else "unknown"


def cache_dir(version: str | None = None) -> Path:
    """``$XDG_CACHE_HOME/rrma/coq-tactics/<version>`` (``~/.cache`` when unset); ``RRMA_TACTIC_INDEX``
    overrides the whole path."""
    override = os.environ.get("RRMA_TACTIC_INDEX")
    if override:
        return Path(override)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "rrma" / "coq-tactics" / (version or coq_version())


def _entry_path(root: Path, module: str) -> Path:
    return root / f"{module}.json"


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ----------------------------------------------------------------------------- building the index


def _qualifier(text: str, module: str) -> dict[str, str]:
    """Short name -> fully qualified name of the lemmas ``text`` (a whole file) declares that are
    reachable from outside it (``Coq.Arith.PeanoNat.Nat.add_comm`` for ``add_comm`` in ``Module Nat``)."""
    premises, _ = coq_file_premises(text)
    out: dict[str, str] = {}
    for p in premises:
        out.setdefault(p.name.split(".")[-1], f"{module}.{p.name}" if module else p.name)
    return out


def qualify(tactic: str, names: dict[str, str], local: Iterable[str]) -> str:
    """``tactic`` with each identifier that is a lemma of its own file (and not a local name of
    the goal) replaced by its fully qualified name."""
    keep = set(local)

    def sub(m: re.Match[str]) -> str:
        word = m.group(0)
        full = names.get(word.rsplit(".", 1)[-1])
        if word in keep or full is None or not (full == word or full.endswith("." + word)):
            return word
        before = tactic[: m.start()]
        if before.endswith(".") or re.search(r"(?:\bas\s*\[[^\]]*|\bas\s+|\bintros?\s+(?:[\w']+\s+)*)$", before):
            return word  # a binder (`as [x y]`, `intros x`), not a reference
        return full

    return _IDENT.sub(sub, tactic)


def index_file(path: Path, *, module: str, coq_args: Sequence[str] = (), noinit: bool = False,
               sentence_seconds: float = 120.0, coqtop: str = "coqtop") -> dict[str, Any]:
    """Run ``path`` in a fresh ``coqtop`` sentence by sentence and record every proof step.

    Returns the index entry (``steps``: :class:`LibraryStep` fields, ``proofs``: whole proofs,
    ``error``: why the run stopped early, if it did). The session is not sandboxed: this is an
    offline step over the installation's own sources, run by the user.
    """
    from oracle.coq.modules import session_args
    from oracle.coq.sandboxing import find_coq_binary
    from oracle.coq.session import CoqSession

    text = path.read_text(encoding="utf-8")
    names = _qualifier(text, module)
    try:
        sentences = split_sentences(text)
    except CoqSyntaxError as exc:
        return {"module": module, "steps": [], "proofs": [], "error": str(exc)}
    # as the module itself (`-top`), as the checker runs a context: some files only compile under their own
    # name (`QArith_base.Qnum` in QArith/QArith_base.v; Classes/CMorphisms.v's relations)
    probe = TheoremTask(name="", statement="", context="", original_proof="", prover="coq", module=module,
                        noinit=noinit)
    session = CoqSession(find_coq_binary(coqtop), args=session_args(probe, coq_args), memory_mb=4096)
    steps: list[dict[str, Any]] = []
    proofs: list[dict[str, Any]] = []
    errors: list[str] = []
    skipping = False
    goal: CoqGoal | None = None
    in_proof = ""  # the open proof's name
    statement = ""
    body: list[str] = []
    batch: list[str] = []

    def flush() -> None:
        """Run the batched sentences outside proofs (an error is counted; coqtop goes on)."""
        nonlocal in_proof, statement, body
        if not batch:
            return
        reply = session.send("\n".join(batch), time.monotonic() + sentence_seconds * 5)
        batch.clear()
        if reply.errors:
            errors.append(reply.errors[0][:300])  # coqtop runs the rest of a chunk after an error
        if reply.proof_name != "Coq":  # a proof opened by a sentence not known to open one
            in_proof, statement, body = reply.proof_name, "", []


    try:
        for sent in sentences:
            if not sent.terminated:
                break
            code = sent.code
            if not in_proof and not _OPENS.match(code):
                batch.append(code)  # outside proofs, sentences run in batches
                if len(batch) >= 50:
                    flush()
                continue
            flush()
            if len(errors) >= MAX_ERRORS:
                break
            if skipping:  # the rest of a proof that failed: it is admitted at its end
                if _PROOF_END.match(code):
                    session.send("Admitted.", time.monotonic() + sentence_seconds)
                    skipping, in_proof, goal, body = False, "", None, []
                continue
            before = goal
            reply = session.send(code, time.monotonic() + sentence_seconds)
            if reply.errors:
                errors.append(f"{code[:80]}: {reply.errors[0][:300]}")
                if in_proof and reply.proof_name != "Coq":
                    if _PROOF_END.match(code) or re.match(r"^Proof\s+(?!using\b|with\b)\S", code):
                        session.send("Admitted.", time.monotonic() + sentence_seconds)
                        in_proof, goal, body = "", None, []
                    else:
                        skipping = True
                continue
            output = re.split(r"<prompt>.*?</prompt>", reply.text, flags=re.S)[0]
            shown = parse_coq_goals(output)
            if not in_proof:
                if reply.proof_name != "Coq":  # this sentence opened a proof
                    in_proof, statement, body = reply.proof_name, code, []
                    goal = shown[0] if shown else None
                continue
            if reply.proof_name == "Coq" or _PROOF_END.match(code):
                if statement and body and code.startswith(("Qed", "Defined")):
                    proofs.append({"theorem": in_proof, "statement": statement, "proof": "\n".join(body)})
                in_proof, goal, body = "", None, []
                continue
            if shown:
                goal = shown[0]
            if _SKIP_STEP.match(code):
                if not code.startswith(("Proof", "Show", "Time", "Focus", "Unfocus")):
                    body.append(code)
                continue
            local = before.hyp_names() if before is not None else []
            tactic = qualify(code, names, [*local, *_binders(before.concl if before else "")])
            body.append(tactic)
            if before is not None and len(tactic) <= 400:
                steps.append({"theorem": in_proof, "goal": before.display()[:GOAL_CHARS], "tactic": tactic,
                              "locals": local})
        else:
            flush()
    except (TimeoutError, OSError, RuntimeError) as exc:
        errors.append(f"{type(exc).__name__}: {exc}"[:300])
    finally:
        session.kill()
    return {"module": module, "steps": steps, "proofs": proofs, "error": "; ".join(errors[:3]),
            "errors": len(errors)}


def _binders(concl: str) -> list[str]:
    out: list[str] = []
    for group in _BINDER.findall(concl):
        for part in re.findall(r"\(([^()]*)\)|([^()]+)", group):
            head = (part[0] or part[1]).split(":")[0]
            out.extend(n for n in head.split() if re.fullmatch(r"[A-Za-z_][\w']*", n))
    return out


def build(paths: Sequence[Path], *, root: Path | None = None, coq_args: Sequence[str] = (),
          force: bool = False, say: Any = None) -> list[Path]:
    """Index each file whose entry is missing or stale (another source hash or :data:`INDEX_VERSION`); the
    entries written."""
    from oracle.coq.modules import attach_modules, logical_module

    root = root or cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for path in paths:
        module = logical_module(path, coq_args)
        if not module:
            if say:
                say(f"skip {path}: outside every load path (no module name)")
            continue
        text = path.read_text(encoding="utf-8")
        digest = source_hash(text)
        target = _entry_path(root, module)
        if not force and target.is_file():
            try:
                held = json.loads(target.read_text())
                if held.get("source") == digest and held.get("version") == INDEX_VERSION:  # else stale: the
                    continue  # loader skips an entry of another version, so it must be rebuilt
            except (OSError, ValueError):
                pass
        probe = TheoremTask(name="", statement="", context="", original_proof="", prover="coq",
                            source_file=str(path))
        noinit = attach_modules([probe], coq_args)[0].noinit
        started = time.monotonic()
        entry = index_file(path, module=module, coq_args=coq_args, noinit=noinit)
        entry.update({"version": INDEX_VERSION, "source": digest, "seconds": round(time.monotonic() - started, 1)})
        with_features(entry)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(entry) + "\n")
        tmp.replace(target)
        written.append(target)
        if say:
            say(f"{module}: {len(entry['steps'])} steps, {len(entry['proofs'])} proofs, {entry['seconds']} s"
                + (f" ({entry['errors']} errors, first: {entry['error'][:120]})" if entry["error"] else ""))
    return written


# ----------------------------------------------------------------------------- the rule


def library_modules(loaded: Iterable[str], target_module: str = "") -> list[str]:
    """The modules whose human proofs may teach the search on a theorem: those its session has
    loaded after the context, less the target's own module (see the module docstring)."""
    return sorted({m for m in loaded if m and m != target_module})


def _normal(statement: str) -> str:
    text = re.sub(r"^\s*(?:#\[[^\]]*\]\s*)*(?:(?:Local|Global)\s+)*\w+\s+", "", statement)
    return " ".join(re.findall(r"[\w'.]+|[^\w\s]", text.strip().rstrip(".")))


def holds_target(entry: dict[str, Any], task: TheoremTask) -> bool:
    """Whether an index entry is (or contains) the target's own file: it records a proof of a
    theorem with the target's name and the same statement."""
    name = task.name.split(".")[-1]
    want = _normal(task.statement)
    return any(p.get("theorem", "").split(".")[-1] == name and _normal(str(p.get("statement", ""))) == want
               for p in entry.get("proofs", []))


# ----------------------------------------------------------------------------- features and k-NN


def display_goal(display: str) -> CoqGoal:
    """A goal display (``h1, h2 : T1; h3 : T2 |- concl``, as :meth:`CoqGoal.display` writes it and the index records
    it) read back as a structured goal; a part without `` : `` is no hypothesis."""
    hyps_text, _, concl = display.rpartition("|- ")
    hyps: list[tuple[tuple[str, ...], str]] = []
    for part in hyps_text.split("; "):
        if " : " in part:
            names, typ = part.split(" : ", 1)
            hyps.append((tuple(n.strip() for n in names.split(",")), typ))
    return CoqGoal(tuple(hyps), concl)


def goal_features(goal: str, extra_locals: Iterable[str] = ()) -> frozenset[str]:
    """Features of a goal display: the conclusion's global symbols, adjacent symbol pairs and head,
    the hypotheses' global symbols (``h:``); hypothesis and bound names are dropped."""
    read = display_goal(goal)
    local = set(extra_locals) | set(_binders(read.concl)) | set(read.hyp_names())
    syms = [t for t in tokens(read.concl) if t not in local]
    feats = set(syms)
    feats.update(f"{a}>{b}" for a, b in itertools.pairwise(syms))
    if syms:
        feats.add(f"head:{syms[0]}")
    for _, typ in read.hyps:
        feats.update(f"h:{t}" for t in tokens(typ) if t not in local)
    return frozenset(feats)


class KnnIndex:
    """Items with binary features and TF-IDF cosine similarity (numpy): the ``k`` nearest items to a
    query among those a mask allows, by one weighted count over the query's posting lists."""

    def __init__(self, items: Sequence[Sequence[str]]) -> None:
        ids: dict[str, int] = {}
        rows: list[list[int]] = []
        for feats in items:
            rows.append([ids.setdefault(f, len(ids)) for f in dict.fromkeys(feats)])
        self.ids = ids
        self.size = len(rows)
        df = np.zeros(len(ids), dtype=np.float64)
        flat = np.fromiter((f for row in rows for f in row), dtype=np.int64,
                           count=sum(len(r) for r in rows))
        owner = np.repeat(np.arange(len(rows), dtype=np.int64), [len(r) for r in rows])
        np.add.at(df, flat, 1.0)
        self.idf = np.log((len(rows) + 1) / (df + 0.5))
        self.norm = np.sqrt(np.bincount(owner, weights=self.idf[flat] ** 2, minlength=len(rows)))
        self.norm[self.norm == 0] = 1.0
        order = np.argsort(flat, kind="stable")
        self.post_items = owner[order]
        bounds = np.searchsorted(flat[order], np.arange(len(ids) + 1))
        self.bounds = bounds

    def nearest(self, feats: Iterable[str], k: int, allowed: np.ndarray | None = None) -> list[tuple[float, int]]:
        """(similarity, item) of the ``k`` best items; ``allowed``: a boolean mask over the items."""
        fids = [self.ids[f] for f in set(feats) if f in self.ids]
        if not fids or not self.size:
            return []
        parts = [self.post_items[self.bounds[f]:self.bounds[f + 1]] for f in fids]
        weights = [np.full(len(p), self.idf[f] ** 2) for p, f in zip(parts, fids, strict=True)]
        counts = np.bincount(np.concatenate(parts), weights=np.concatenate(weights), minlength=self.size)
        qnorm = float(np.sqrt(sum(self.idf[f] ** 2 for f in fids))) or 1.0
        scores = counts / (self.norm * qnorm)
        if allowed is not None:
            scores = np.where(allowed, scores, 0.0)
        k = min(k, self.size)
        top = np.argpartition(-scores, k - 1)[:k]
        ranked = sorted(((float(scores[i]), int(i)) for i in top if scores[i] > 0), reverse=True)
        return ranked


def adapt(tactic: str, source_locals: Sequence[str], source_goal: str, target: CoqGoal | None) -> str | None:
    """``tactic`` with the source goal's local names mapped onto the target goal's: a name the
    target also has is kept; another is mapped to the target hypothesis whose type shares the most
    symbols with the source one's; None when a name cannot be mapped."""
    mentioned = [n for n in dict.fromkeys(_IDENT.findall(tactic)) if n in source_locals]
    if not mentioned:
        return tactic
    target_hyps = [(n, t) for names, t in (target.hyps if target is not None else ()) for n in names]
    target_names = {n for n, _ in target_hyps}
    src_types = {n: typ for names, typ in display_goal(source_goal).hyps for n in names}
    mapping: dict[str, str] = {}
    used: set[str] = set()
    for name in mentioned:
        if name in target_names:
            mapping[name] = name
            used.add(name)
    for name in mentioned:
        if name in mapping:
            continue
        want = set(tokens(src_types.get(name, "")))
        best, score = None, 0.0
        for other, typ in target_hyps:
            if other in used:
                continue
            have = set(tokens(typ))
            s = len(want & have) / (len(want | have) or 1)
            if s > score:
                best, score = other, s
        if best is None or score < 0.34:
            return None
        mapping[name] = best
        used.add(best)
    if all(k == v for k, v in mapping.items()):
        return tactic
    return re.sub(r"[A-Za-z_][\w']*", lambda m: mapping.get(m.group(0), m.group(0)), tactic)


# round sixteen, measured and left off: the first VOTE_KEEP distinct tactics are those of the nearest recorded
# goals, the rest ranked by a vote of the VOTE_K nearest (each distinct tactic scores the sum of its goals'
# similarities squared). Offline (python -m benches.coq.knn_eval) the human tactic is among the first 8 proposals
# more often, but only where it is one of the index's most common tactics (`subst.`, `trivial.`), which the rules
# offer anyway; a less common one is hit no more often, and the common ones fill twice the slots. In-sample on
# out-of-sample 28 it proved 34 of 82 against 37 (a vote for every slot: 29); docs/proofs.md, "Round sixteen"
VOTE = False
NEAREST = 40  # the recorded goals whose tactics the k-NN proposes, in the order met (LibraryTactics' k)
VOTE_K = 320
VOTE_KEEP = 4
VOTE_POWER = 2.0


def vote(near: Sequence[tuple[float, int]], tactic_of: Callable[[int], str],
         power: float = VOTE_POWER) -> list[int]:
    """One item per distinct tactic among ``near`` ((similarity, item), best first), the first met as its
    representative, ordered by the sum of ``similarity ** power`` over the items of that tactic (ties: the
    order first met)."""
    score: dict[str, float] = {}
    first: dict[str, int] = {}
    for sim, item in near:
        tactic = tactic_of(item)
        score[tactic] = score.get(tactic, 0.0) + sim ** power
        first.setdefault(tactic, item)
    return [first[t] for t in sorted(first, key=lambda t: -score[t])]  # stable: a tie keeps the order met


def proposal_order(near: Sequence[tuple[float, int]], tactic_of: Callable[[int], str], first: int = NEAREST,
                   keep: int = VOTE_KEEP, power: float = VOTE_POWER) -> list[int]:
    """The items to propose from, in order: those of the first ``keep`` distinct tactics met among the ``first``
    nearest, then the rest by :func:`vote` over all of ``near``."""
    out: list[int] = []
    taken: set[str] = set()
    for _, item in near[:first]:
        tactic = tactic_of(item)
        if tactic in taken:
            continue
        if len(taken) >= keep:
            break
        taken.add(tactic)
        out.append(item)
    return out + [item for item in vote(near, tactic_of, power) if tactic_of(item) not in taken]


class LibraryTactics:
    """k-NN tactic suggestions from the human proofs of the target's library (a ``TacticSuggester``).

    ``root``: the index folder (default :func:`cache_dir`). Every entry there is loaded once
    (:meth:`load`: an offline model, read before any theorem's clock starts); which modules may teach
    the search is set per theorem by :meth:`use` (the rule: :func:`library_modules`), and a step or
    proof of any other module is never proposed (a mask over the items, applied to every query).
    """

    def __init__(self, root: Path | None = None, *, k: int = NEAREST, per_goal: int = 8, whole: int = 3) -> None:
        self.root = root if root is not None else cache_dir()
        self.k, self.per_goal, self.whole = k, per_goal, whole
        self.steps: list[LibraryStep] = []
        self.proofs: list[LibraryProof] = []
        self.index: KnnIndex | None = None
        self.proof_index: KnnIndex | None = None
        self.module_names: list[str] = []
        self.step_module = np.zeros(0, dtype=np.int64)  # module id of each step
        self.proof_module = np.zeros(0, dtype=np.int64)
        self.targets: dict[str, list[tuple[str, str]]] = {}  # module -> (theorem, statement) of its proofs
        self.allowed_steps: np.ndarray | None = None
        self.allowed_proofs: np.ndarray | None = None
        self.modules: tuple[str, ...] = ()  # what the current theorem may learn from
        self.excluded: list[str] = []  # left out by the second guard (:func:`holds_target`) for this theorem
        self.loaded = False
        # set by the search for each theorem: whether the theorem's scope can read a tactic (a step of an
        # ssreflect file where ssreflect's notations are not imported cannot); a refused step takes no slot
        self.screen: Callable[[str, ProofState], bool] | None = None

    def available(self) -> bool:
        return self.root.is_dir() and any(self.root.glob("*.json"))

    def load(self) -> LibraryTactics:
        """Read every entry of the index folder (features are computed and written back once for an
        entry that lacks them); idempotent."""
        if self.loaded:
            return self
        self.loaded = True
        step_feats: list[list[str]] = []
        proof_feats: list[list[str]] = []
        step_mod: list[int] = []
        proof_mod: list[int] = []
        for path in sorted(self.root.glob("*.json")) if self.root.is_dir() else []:
            try:
                entry = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(entry, dict) or entry.get("version") != INDEX_VERSION:
                continue
            if with_features(entry):
                with contextlib.suppress(OSError):
                    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
            module = str(entry.get("module", path.stem))
            mid = len(self.module_names)
            self.module_names.append(module)
            for st in entry.get("steps", []):
                self.steps.append(LibraryStep(module, st["theorem"], st["goal"], st["tactic"],
                                              tuple(st.get("locals", ()))))
                step_feats.append(st["features"])
                step_mod.append(mid)
            for pr in entry.get("proofs", []):
                self.proofs.append(LibraryProof(module, pr["theorem"], pr["statement"], pr["proof"]))
                proof_feats.append(pr["features"])
                proof_mod.append(mid)
            self.targets[module] = [(p.get("theorem", ""), p.get("statement", "")) for p in entry.get("proofs", [])]
        self.index = KnnIndex(step_feats) if step_feats else None
        self.proof_index = KnnIndex(proof_feats) if proof_feats else None
        self.step_module = np.array(step_mod, dtype=np.int64)
        self.proof_module = np.array(proof_mod, dtype=np.int64)
        return self

    def use(self, modules: Iterable[str], task: TheoremTask) -> None:
        """Learn, for ``task``, from these modules only (the caller's :func:`library_modules`), less
        any that holds the target itself (:func:`holds_target`)."""
        self.load()
        chosen = set(modules)
        self.excluded = sorted(m for m in chosen if m in self.targets
                               and holds_target({"proofs": [{"theorem": t, "statement": st}
                                                            for t, st in self.targets[m]]}, task))
        ids = [i for i, m in enumerate(self.module_names) if m in chosen and m not in self.excluded]
        self.modules = tuple(self.module_names[i] for i in ids)
        self.allowed_steps = np.isin(self.step_module, ids)
        self.allowed_proofs = np.isin(self.proof_module, ids)

    def candidates(self, task: TheoremTask, state: ProofState) -> list[Candidate]:
        if not state.goals or self.index is None or self.allowed_steps is None or not self.modules:
            return []
        detail: CoqGoal | None = state.detail[0] if state.detail else None
        goal = state.goals[0]
        out: list[Candidate] = []
        seen: set[str] = set()
        near = self.index.nearest(goal_features(goal), max(self.k, VOTE_K) if VOTE else self.k, self.allowed_steps)
        for i in (proposal_order(near, lambda item: self.steps[item].tactic, self.k, VOTE_KEEP, VOTE_POWER) if VOTE
                  else [i for _, i in near]):
            step = self.steps[i]
            tactic = adapt(step.tactic, step.locals, step.goal, detail)
            if tactic is None or tactic in seen or (self.screen is not None and not self.screen(step.tactic, state)):
                continue
            seen.add(tactic)
            out.append(Candidate(tactic, 0.45 + 0.06 * len(out), source="library"))
            if len(out) >= self.per_goal:
                break
        if not state.handle and self.proof_index is not None:  # at the statement: whole proofs
            near = self.proof_index.nearest(tokens(task.statement), self.whole, self.allowed_proofs)
            for rank, (_, i) in enumerate(near):
                if self.screen is None or self.screen(self.proofs[i].proof, state):
                    out.append(Candidate(self.proofs[i].proof, 0.5 + 0.03 * rank, True, "library"))
        return out

    def learn(self, task: TheoremTask, steps: Sequence[tuple[str, str]]) -> None:
        return None  # the run's own proofs are LearnedTactics'; the library is fixed


def with_features(entry: dict[str, Any]) -> bool:
    """Add the k-NN features to an index entry's steps and proofs that lack them; whether any did."""
    changed = False
    for st in entry.get("steps", []):
        if "features" not in st:
            st["features"] = sorted(goal_features(st["goal"], st.get("locals", ())))
            changed = True
    for pr in entry.get("proofs", []):
        if "features" not in pr:
            pr["features"] = sorted(set(tokens(pr["statement"])))
            changed = True
    return changed


# ----------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agents.library_tactics build [--force] FILE_OR_DIR...``: index these sources
    (default: the whole standard library) into :func:`cache_dir`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m agents.library_tactics")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="index the human proofs of these .v files (default: the standard library)")
    b.add_argument("sources", nargs="*", type=Path)
    b.add_argument("--force", action="store_true", help="rebuild entries that are up to date")
    b.add_argument("--root", type=Path, help="index folder (default: the user cache, per Coq version)")
    b.add_argument("--deps-of", nargs="*", type=Path, default=[],
                   help="also every stdlib file these files load (their Print Libraries), but not them")
    b.add_argument("--preload", default="", help="sentences loaded before each --deps-of file's header "
                                                 "(the bench's --hammer preload)")
    args = parser.parse_args(argv)
    paths: list[Path] = []
    for source in args.sources:
        paths.extend(sorted(source.rglob("*.v")) if source.is_dir() else [source])
    if args.deps_of:
        paths.extend(dependency_files(args.deps_of, args.preload))
    if not args.sources and not args.deps_of:
        where = subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip()
        paths = sorted((Path(where) / "theories").rglob("*.v"))
    build(list(dict.fromkeys(paths)), root=args.root, force=args.force, say=lambda line: print(line, flush=True))
    return 0


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` did: the dependency modules' files, those indexed now, the seconds."""

    files: int
    built: int
    seconds: float


def prepare(targets: Sequence[Path], *, preload: str = "", root: Path | None = None,
            say: Any = None) -> Prepared:
    """Index the human proofs of every stdlib file ``targets`` load (after ``preload``) that the
    index at ``root`` lacks or holds stale, never the targets: what ``bench coq`` runs before its
    first theorem, so that a fresh machine's search learns from the same library as one where the
    index was built by hand. Up-to-date entries cost a hash each."""
    started = time.monotonic()
    files = list(dict.fromkeys(dependency_files(targets, preload)))
    written = build(files, root=root, say=say)
    return Prepared(len(files), len(written), round(time.monotonic() - started, 1))


def dependency_files(targets: Sequence[Path], preload: str = "") -> list[Path]:
    """The stdlib sources of the modules each target's header (after ``preload``) loads, never the
    targets themselves."""
    from oracle.coq.modules import libraries_loaded_by, logical_module

    where = Path(subprocess.run(["coqc", "-where"], capture_output=True, text=True, check=True).stdout.strip())
    out: list[Path] = []
    for target in targets:
        own = logical_module(target)
        text = target.read_text(encoding="utf-8")
        header = "\n".join(s.code for s in split_sentences(text)
                           if re.match(r"^(?:From\s+\S+\s+)?Require\b", s.code))
        for module in sorted(libraries_loaded_by(preload + header, own.startswith("Coq.Init."))):
            if module == own or not module.startswith("Coq."):
                continue
            path = where / "theories" / Path(*module.split(".")[1:]).with_suffix(".v")
            if path.is_file():
                out.append(path)
    return out


if __name__ == "__main__":
    sys.exit(main())
