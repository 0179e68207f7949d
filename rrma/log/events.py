"""Run-log events: versioned pydantic models discriminated by ``kind``, hash-chained.

Every line of ``events.jsonl`` is one :data:`Event`. The envelope is the same for all kinds:
``v`` (schema version), ``seq`` (0, 1, 2... gap-free), ``ts`` (UTC, ISO 8601), ``kind``,
``actor`` (``agent:<name>``, ``oracle``, ``harness``, ``human:<name>``), ``data`` (the
kind's payload model), ``prev`` (the previous line's hash; ``GENESIS`` for seq 0) and
``hash`` = sha256(prev + canonical JSON of every other field except ``hash``).

Invariants: a log is a chain (each ``prev`` equals the previous ``hash``; ``seq`` increases by
one); a reader of version ``v`` refuses a line of a newer version with a clear message instead
of guessing; unknown data fields are kept (``extra="allow"``) so older readers can still
display newer payloads of the same version.

**No line is longer than** :data:`MAX_EVENT_BYTES` (1 MiB): every reader parses whole lines, so one
huge line (an agent's 50 MB turn) would cost every view, export and append that touches it. The
writer (:func:`build_line`, given the store's blob writer) fits an event that is over the cap: each
string longer than :data:`CLIP_KEEP_CHARS` keeps its head and tail (:func:`rrma.text.clip_middle`,
which says how many characters it cut), then, while the line is still over, the largest list or
mapping field becomes empty; every value cut goes whole to a blob, named in the payload's
``clipped`` field (``{path: {"blob": sha256, "bytes": n}}``; ``args.content``, ``edits[3].path``).
A ``run.started`` (the task snapshot) or a ``review`` (a signature covers its note) is never cut:
over the cap it is refused (:class:`EventTooLarge`), as is an event the cuts cannot fit.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    model_serializer,
)

SCHEMA_VERSION = 1
GENESIS = "0" * 64
MAX_EVENT_BYTES = 1024 * 1024  # one log line, UTF-8, without its newline (the readers' block: rrma/log/tail.py)
CLIP_KEEP_CHARS = 16 * 1024  # what an event over the cap keeps of each long string (head and tail)
NEVER_CLIPPED = ("run.started", "review")  # the task snapshot; a note a signature covers: refused, never cut


class LogFormatError(ValueError):
    """A line of the run log is not a valid event (torn, corrupted, or from a newer version)."""


class EventTooLarge(LogFormatError):
    """An event whose line would be over MAX_EVENT_BYTES even after its long values were cut (not written)."""


class _Data(BaseModel):
    model_config = ConfigDict(extra="allow")


# ----------------------------------------------------------------------------- payloads


class RunStartedData(_Data):
    run_id: str
    task_name: str
    task: dict[str, Any]  # the validated task config snapshot
    seed: int = 0
    versions: dict[str, str] = Field(default_factory=dict)
    run_json_sha256: str | None = None  # sha256 of run.json's bytes as written (None in older logs)
    head_record: bool = False  # the run keeps head.json (its absence is then an error, not a warning)
    # the agents as resolved when the run started: [{name, backend, model, endpoint, endpoint_from}] (no keys)
    agents: list[dict[str, Any]] = Field(default_factory=list)
    experiment: dict[str, Any] | None = None  # the cell of an experiment this run is: {id, arm, seed}
    # the prepared oracle's held-out paths (Oracle.held_out: answers, originals, validation data), for the audit
    held_out: list[str] | None = None  # None: a log written before it was recorded
    # a proof run's theorems as the prepared oracle named them, in its order: [{name, difficulty}] (the views count
    # progress against all of them from the start; rrma/log/theorems.py). None: not a proof run, or an older log
    theorems: list[dict[str, str]] | None = None


class RunResumedData(_Data):
    reason: str = "resume"
    torn_offsets: list[int] = Field(default_factory=list)  # byte offsets of sealed torn lines
    interrupted_trials: list[str] = Field(default_factory=list)
    agents: list[dict[str, Any]] = Field(default_factory=list)  # the resumed run's agents, as in run.started


class RunFinishedData(_Data):
    reason: str  # max_trials | max_wall_time | target | completed | interrupted | stopped | agents_exhausted | baseline_failed | error
    summary: dict[str, Any] = Field(default_factory=dict)


class AgentTurnData(_Data):
    agent: str
    step: int = 0  # the agent's own turn counter
    role: Literal["system", "user", "assistant", "tool_call", "tool_result", "error"] = "assistant"
    text: str = ""
    tool: str | None = None
    args: dict[str, Any] | None = None
    result: str | None = None
    trial_id: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cache_read: int = 0
    cache_write: int = 0
    latency_s: float = 0.0
    cost_usd: float = 0.0
    model: str | None = None


class EditRecord(_Data):
    path: str
    blob: str | None = None  # sha256 of the new content (None for a delete)
    delete: bool = False


class TrialProposedData(_Data):
    trial_id: str
    parent: str | None
    agent: str
    hypothesis: str = ""
    expected_effect: str = ""
    proposal_blob: str  # the full Proposal as JSON, content-addressed
    edits: list[EditRecord] = Field(default_factory=list)
    manifest_blob: str | None = None  # path -> blob sha of the resulting workspace
    theorem: str | None = None
    baseline: bool = False
    repeat: int = 0  # baseline repeat index
    seed: int = 0
    cache_key: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)  # agent-private proposal details (sampled params)
    confirms: str | None = None  # a confirmation repeat of this trial (loop.confirm): not an agent trial


class TrialStartedData(_Data):
    trial_id: str
    executor: str = "local"
    worker: str | None = None


class TrialProgressData(_Data):
    trial_id: str
    sample: dict[str, Any]  # e.g. {"step": 100, "loss": 2.31, "elapsed": 12.5}


class TrialFinishedData(_Data):
    trial_id: str
    status: str  # rrma.trial.Status value
    score: float | None = None
    metrics: dict[str, Any] = Field(default_factory=dict)
    feedback: str = ""
    log_blob: str | None = None
    seconds: float = 0.0
    cached: bool = False
    cached_from: str | None = None  # trial id (or "run/trial") whose outcome was reused
    delta: float | None = None  # score - best at the time, signed so that > 0 is better
    delta_sigma: float | None = None
    floor: float | None = None  # the improvement promotion needed at the time (None: not compared)
    floor_source: str | None = None  # what set it: baseline, oracle SE, paired (rrma/run/promotion.py)
    early_abort: dict[str, Any] | None = None  # the decision that stopped it: rule, look, predicted, bound...


class TrialPromotedData(_Data):
    trial_id: str
    score: float
    previous_best: str | None
    previous_score: float | None
    delta: float | None = None
    delta_sigma: float | None = None
    approved_by: str | None = None  # hitl gate: the reviewer whose approval promoted it
    confirmed_by: list[str] = Field(default_factory=list)  # loop.confirm: the repeats whose mean is the score


class TrialConfirmedData(_Data):
    """The verdict of loop.confirm on a would-be new best: its fresh repeats and whether their mean holds."""

    trial_id: str
    repeats: list[str]  # the repeat trials (trial.proposed with confirms = trial_id)
    scores: list[float | None]  # their scores (None: the repeat failed)
    mean: float | None  # mean of the scored repeats (None: none scored)
    best_trial: str | None  # the best when the verdict was made
    best_score: float | None
    delta: float | None  # mean over the best, signed so that > 0 is better
    floor: float  # what the mean had to clear
    floor_source: str = "baseline"
    confirmed: bool
    awaiting_review: bool = False  # confirmed under the hitl gate: a person's approval promotes it
    reason: str = ""  # why not, in words


class BaselineMeasuredData(_Data):
    trial_ids: list[str]
    scores: list[float]
    mean: float
    sigma: float  # sample standard deviation (0 with one repeat)
    floor: float  # the improvement needed to promote: max(min_sigmas*sigma, min_delta)


class BlackboardPostData(_Data):
    agent: str
    text: str
    trial_id: str | None = None
    tags: list[str] = Field(default_factory=list)


class ReviewData(_Data):
    trial_id: str
    decision: Literal["approve", "reject", "flag", "withdraw"]  # withdraw: the trial is unreviewed again
    reviewer: str
    note: str = ""
    supersedes: int | None = None  # seq of the trial's review this one replaces (the old one stays in the log)
    # signed reviews (rrma/log/signing.py); all None on an unsigned review and in logs written before them
    signature: str | None = None  # armored SSHSIG (ssh-keygen -Y sign, namespace rrma-review)
    key_fingerprint: str | None = None  # SHA256:... of the key that signed
    trial_finished: str | None = None  # hash of the trial.finished event the signature is bound to

    @model_serializer(mode="wrap")
    def _unsigned_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An unsigned review is written exactly as before signing existed (no null signature fields)."""
        out: dict[str, Any] = handler(self)
        for name in ("signature", "key_fingerprint", "trial_finished", "supersedes"):
            if out.get(name, 0) is None:
                del out[name]
        return out


class NoteData(_Data):
    text: str


class RunControlData(_Data):
    """A person's order to the live loop (``rrma-tui stop|pause|continue``, the dashboard's keys).

    The driver's loop obeys it within about a second (rrma/log/control.py says how): ``stop`` ends
    proposing and the run finishes as ``stopped``; ``pause`` holds new proposals until ``continue``.
    An order applies to the driver that is running when it is written: a later ``run.resumed``
    starts unpaused and unstopped.
    """

    action: Literal["stop", "pause", "continue"]
    by: str  # "human:<name>", the same as the event's actor
    reason: str = ""


class AgentSteerData(_Data):
    """A person's note to one, several or all agents: it is in their context from their next proposal on."""

    text: str
    by: str  # "human:<name>", the same as the event's actor
    to: list[str] = Field(default_factory=list)  # agent names; empty: every agent


AUDIT_KINDS = ("claim_mismatch", "metric_tampering", "scorer_access", "answer_lookup", "copied", "noise_only",
               "out_of_scope")  # fixed names (docs/audit.md): other tools read them
AUDIT_SEVERITIES = ("info", "warn", "high")


class AuditEvidence(_Data):
    seq: int  # the event the finding cites (an agent.turn, a blackboard.post, a trial.proposed...)
    quote: str = ""  # a short quote of it


class AuditFindingData(_Data):
    """What the auditor (rrma/audit) found about a trial: it never approves and never changes a score.

    A ``high`` finding holds the trial's promotion until a person reviews it (``held`` below says
    whether it did). ``source`` is ``rule`` or ``judge:<model>``; ``rule`` names the check that fired.
    """

    finding_id: str  # sha256 of (trial, kind, rule, cited seqs), first 16 hex: the same finding is written once
    trial_id: str
    kind: Literal["claim_mismatch", "metric_tampering", "scorer_access", "answer_lookup", "copied", "noise_only",
                  "out_of_scope"]
    severity: Literal["info", "warn", "high"]
    source: str = "rule"
    rule: str = ""
    explanation: str
    evidence: list[AuditEvidence] = Field(default_factory=list)
    held: bool = False  # it held the trial's promotion (the trial waits for a person's review)
    model: str | None = None  # judge findings: the model and the rubric's prompt version
    prompt_version: str | None = None


class AuditDismissedData(_Data):
    """A reviewer's dismissal of one finding, with a note (the finding stays in the log)."""

    finding_seq: int  # seq of the audit.finding event dismissed
    trial_id: str
    by: str  # "human:<name>", the same as the event's actor
    note: str = ""


TRAIN_METHODS = ("sft", "grpo", "sdpo")
TRAIN_ACTOR = "trainer"


class TrainStartedData(_Data):
    """A training session begins (``rrma-tui train``): which method, from which policy, with which settings."""

    method: Literal["sft", "grpo", "sdpo"]
    base_model: str  # the policy trained: a model directory, an adapter directory, or "tiny" (built here)
    config: dict[str, Any] = Field(default_factory=dict)  # the trainer's settings (lr, group size, beta, LoRA...)
    dataset: dict[str, Any] | None = None  # sft: where its rows came from {runs, rows, heads}
    resumed_from: int | None = None  # the step of the checkpoint this session resumed from (None: a fresh start)


class TrainStepData(_Data):
    """One optimizer step. Every number is finite or None (a non-finite value is recorded as None + nonfinite)."""

    method: str
    step: int
    loss: float | None = None
    reward_mean: float | None = None  # grpo/sdpo: the mean reward of this step's rollouts
    reward_std: float | None = None
    kl: float | None = None  # KL to the reference policy (grpo/sdpo with beta > 0)
    entropy: float | None = None  # mean per-token entropy of the policy on its completions
    grad_norm: float | None = None
    zero_variance_frac: float | None = None  # fraction of groups whose rewards were all equal (no signal)
    novelty_rate: float | None = None  # fraction of this step's rollouts whose edit no earlier trial made
    tokens: int | None = None  # completion tokens generated this step (grpo/sdpo), tokens trained on (sft)
    seconds: float | None = None
    lr: float | None = None
    trials: list[str] = Field(default_factory=list)  # grpo/sdpo: the rollouts' trial ids, in order
    rewards: list[float] = Field(default_factory=list)  # the reward of each of them (same order)
    extra: dict[str, float | None] = Field(default_factory=dict)  # the trainer's other logged figures
    nonfinite: list[str] = Field(default_factory=list)  # names of the figures that were NaN/inf


class TrainCheckpointData(_Data):
    """A checkpoint or adapter saved as a content-addressed artifact of the run (``artifacts/<sha256>/``)."""

    step: int
    kind: Literal["checkpoint", "adapter", "model"]
    artifact: str  # sha256 of the artifact's manifest (path -> sha256 of each file)
    path: str  # relative to the run directory


class TrainFinishedData(_Data):
    reason: str  # done | stopped | error
    steps: int
    artifact: str | None = None  # the final adapter or model (sha256), when one was saved
    path: str | None = None
    summary: dict[str, Any] = Field(default_factory=dict)


# ----------------------------------------------------------------------------- envelopes


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    v: int = Field(SCHEMA_VERSION, ge=1, le=SCHEMA_VERSION)
    seq: int
    ts: str
    actor: str
    prev: str
    hash: str


class RunStarted(_Envelope):
    kind: Literal["run.started"]
    data: RunStartedData


class RunResumed(_Envelope):
    kind: Literal["run.resumed"]
    data: RunResumedData


class RunFinished(_Envelope):
    kind: Literal["run.finished"]
    data: RunFinishedData


class AgentTurn(_Envelope):
    kind: Literal["agent.turn"]
    data: AgentTurnData


class TrialProposed(_Envelope):
    kind: Literal["trial.proposed"]
    data: TrialProposedData


class TrialStarted(_Envelope):
    kind: Literal["trial.started"]
    data: TrialStartedData


class TrialProgress(_Envelope):
    kind: Literal["trial.progress"]
    data: TrialProgressData


class TrialFinished(_Envelope):
    kind: Literal["trial.finished"]
    data: TrialFinishedData


class TrialPromoted(_Envelope):
    kind: Literal["trial.promoted"]
    data: TrialPromotedData


class BaselineMeasured(_Envelope):
    kind: Literal["baseline.measured"]
    data: BaselineMeasuredData


class BlackboardPost(_Envelope):
    kind: Literal["blackboard.post"]
    data: BlackboardPostData


class Review(_Envelope):
    kind: Literal["review"]
    data: ReviewData


class TrialConfirmed(_Envelope):
    kind: Literal["trial.confirmed"]
    data: TrialConfirmedData


class Note(_Envelope):
    kind: Literal["note"]
    data: NoteData


class RunControl(_Envelope):
    kind: Literal["run.control"]
    data: RunControlData


class AgentSteer(_Envelope):
    kind: Literal["agent.steer"]
    data: AgentSteerData


class AuditFinding(_Envelope):
    kind: Literal["audit.finding"]
    data: AuditFindingData


class AuditDismissed(_Envelope):
    kind: Literal["audit.dismissed"]
    data: AuditDismissedData


class TrainStarted(_Envelope):
    kind: Literal["train.started"]
    data: TrainStartedData


class TrainStep(_Envelope):
    kind: Literal["train.step"]
    data: TrainStepData


class TrainCheckpoint(_Envelope):
    kind: Literal["train.checkpoint"]
    data: TrainCheckpointData


class TrainFinished(_Envelope):
    kind: Literal["train.finished"]
    data: TrainFinishedData


Event = Annotated[
    RunStarted
    | RunResumed
    | RunFinished
    | AgentTurn
    | TrialProposed
    | TrialStarted
    | TrialProgress
    | TrialFinished
    | TrialPromoted
    | TrialConfirmed
    | BaselineMeasured
    | BlackboardPost
    | Review
    | Note
    | RunControl
    | AgentSteer
    | AuditFinding
    | AuditDismissed
    | TrainStarted
    | TrainStep
    | TrainCheckpoint
    | TrainFinished,
    Field(discriminator="kind"),
]

EVENT_TYPES: dict[str, type[_Envelope]] = {
    cls.model_fields["kind"].annotation.__args__[0]: cls  # type: ignore[union-attr]
    for cls in (
        RunStarted, RunResumed, RunFinished, AgentTurn, TrialProposed, TrialStarted, TrialProgress,
        TrialFinished, TrialPromoted, TrialConfirmed, BaselineMeasured, BlackboardPost, Review, Note, RunControl, AgentSteer,
        AuditFinding, AuditDismissed, TrainStarted, TrainStep, TrainCheckpoint, TrainFinished,
    )
}
DATA_TYPES: dict[str, type[_Data]] = {kind: cls.model_fields["data"].annotation for kind, cls in EVENT_TYPES.items()}  # type: ignore[misc]

_EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Event)


# ----------------------------------------------------------------------------- hashing


def canonical(obj: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, UTF-8 kept (the hashed form)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def compute_hash(fields: dict[str, Any]) -> str:
    """sha256 over prev + canonical JSON of every field except ``hash``."""
    body = {k: v for k, v in fields.items() if k != "hash"}
    return hashlib.sha256((fields["prev"] + canonical(body)).encode("utf-8")).hexdigest()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def parse_ts(ts: str) -> datetime | None:
    """An event's ``ts`` (ISO 8601, UTC, ``Z``) as a datetime; None when it is empty or not one."""
    if not ts:
        return None
    try:
        return datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def build_line(seq: int, prev: str, kind: str, actor: str, data: BaseModel | dict[str, Any],
               put_blob: Callable[[str], str] | None = None) -> tuple[str, str]:
    """Validate ``data`` for ``kind`` and return (line without newline, hash).

    A line over :data:`MAX_EVENT_BYTES` is fitted with ``put_blob`` (the run's blob writer: text in,
    sha256 out) as the module docstring says; EventTooLarge when it cannot be (or no ``put_blob``).
    """
    model = DATA_TYPES.get(kind)
    if model is None:
        raise LogFormatError(f"unknown event kind {kind!r}; known: {', '.join(sorted(DATA_TYPES))}")
    if isinstance(data, BaseModel):
        payload = data.model_dump(mode="json")
    else:
        try:
            payload = model.model_validate(data).model_dump(mode="json")
        except ValidationError as exc:
            raise LogFormatError(f"invalid data for {kind}: {exc}") from exc
    fields: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "seq": seq,
        "ts": now_iso(),
        "kind": kind,
        "actor": actor,
        "data": payload,
        "prev": prev,
    }
    line = canonical(fields)
    if _over_cap(line):
        if put_blob is None or kind in NEVER_CLIPPED:
            raise EventTooLarge(_too_large(kind, line, payload, "" if put_blob is not None else " (no blob store)"))
        fields["data"] = payload = fit_payload(payload, put_blob, MAX_EVENT_BYTES - (len(line.encode()) -
                                                                                      len(canonical(payload).encode())))
        line = canonical(fields)
        if _over_cap(line):
            raise EventTooLarge(_too_large(kind, line, payload, " even with its long values cut"))
    digest = hashlib.sha256((prev + line).encode("utf-8")).hexdigest()
    fields["hash"] = digest
    return canonical(fields), digest


def _over_cap(line: str) -> bool:
    """Whether ``line`` is over MAX_EVENT_BYTES in UTF-8 (encoded only when it might be: 4 bytes a character at most)."""
    return len(line) * 4 > MAX_EVENT_BYTES and len(line.encode("utf-8")) > MAX_EVENT_BYTES


def _too_large(kind: str, line: str, payload: dict[str, Any], how: str) -> str:
    sizes = {name: len(canonical(value).encode("utf-8")) for name, value in payload.items()}
    largest = max(sizes, key=lambda name: sizes[name]) if sizes else "?"
    return (f"{kind} event of {len(line.encode('utf-8'))} bytes is over the {MAX_EVENT_BYTES} byte limit of one "
            f"log line{how} (its largest field: data.{largest}, {sizes.get(largest, 0)} bytes); not written")


def fit_payload(payload: dict[str, Any], put_blob: Callable[[str], str], room: int) -> dict[str, Any]:
    """``payload`` cut to fit ``room`` bytes of canonical JSON, each cut value's whole text in a blob.

    First every string longer than CLIP_KEEP_CHARS (anywhere in it) keeps its head and tail; then,
    while it is still over, the largest list or mapping field is emptied (its JSON to a blob). The
    cuts are recorded in ``clipped`` ({path: {"blob", "bytes"}}, merged with any it had).
    """
    from rrma.text import clip_middle

    whole: dict[str, str] = {}  # path -> the text of each value cut (written to blobs at the end, once)

    def cut(value: Any, path: str) -> Any:
        if type(value) is str and len(value) > CLIP_KEEP_CHARS:
            whole[path] = value
            return clip_middle(value, CLIP_KEEP_CHARS)
        if type(value) is dict:
            return {k: cut(v, f"{path}.{k}") for k, v in value.items()}
        if type(value) is list:
            return [cut(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    def size(out: dict[str, Any]) -> int:  # with the clipped record it will carry (a blob name: 64 characters)
        return len(canonical({**out, "clipped": {p: {"blob": GENESIS, "bytes": len(t)} for p, t in whole.items()}})
                   .encode("utf-8"))

    out = {name: value if name == "clipped" else cut(value, name) for name, value in payload.items()}
    sizes = {name: len(canonical(value).encode("utf-8")) for name, value in out.items()
             if name != "clipped" and type(value) in (dict, list) and value}
    for name in sorted(sizes, key=lambda n: sizes[n], reverse=True):
        if size(out) <= room:
            break
        for path in [p for p in whole if p.startswith((f"{name}.", f"{name}["))]:
            del whole[path]  # inside the value that goes to a blob whole
        whole[name] = canonical(payload[name])  # its strings uncut
        out[name] = type(out[name])()
    clipped = {path: {"blob": put_blob(text), "bytes": len(text.encode("utf-8"))} for path, text in whole.items()}
    earlier = out.get("clipped")
    out["clipped"] = {**(earlier if type(earlier) is dict else {}), **clipped}
    return out


def parse_line(line: str | bytes) -> Any:
    """Parse one log line into its Event model, or raise LogFormatError saying why."""
    try:
        return _EVENT_ADAPTER.validate_json(line)  # fast path: JSON parsed and validated in pydantic-core
    except ValidationError:
        pass  # slow path below explains what is wrong
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as exc:
        raise LogFormatError(f"not JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(raw, dict):
        raise LogFormatError("not a JSON object")
    version = raw.get("v")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise LogFormatError(
            f"event schema version {version} is newer than this rrma understands ({SCHEMA_VERSION}); upgrade rrma"
        )
    try:
        return _EVENT_ADAPTER.validate_python(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise LogFormatError(f"invalid event ({loc}: {first['msg']})") from exc


