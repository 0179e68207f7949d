"""Task configuration: one YAML file says everything about a task.

:class:`TaskConfig` is the single typed settings table: every field has a type, a default and a
one-line docstring (``rrma-tui task-schema`` prints the table from these: rrma/task_schema.py). :func:`load_task`
turns any problem into a :class:`TaskError` that names the file, the field path and what was
expected, e.g. ``task.yaml: budget.trial_seconds: Input should be greater than 0 (got -5)``.

Paths inside a task (``workspace.source``) are relative to the YAML file's directory. Every count
and size (and the seed) has an upper bound, shown in the table and named with the allowed range in its
error (``noise.baseline_repeats: ... (got 100000000); allowed: from 1 to 1,000``). Every float
field is finite (``1e400`` reads as infinity: refused, not an overflow mid-run), and a YAML file whose
aliases expand to more than :data:`MAX_YAML_NODES` values (an alias bomb) is refused before it is
built (:func:`read_yaml`, also used for experiment files and ``--set`` values).

The table holds the core's own fields only (``rrma/task_schema.py`` prints it, with the plug-ins' own). What a plug-in takes (``oracle.params``, ``agents[].params``, and
the sections it owns, like the command oracle's ``oracle.scorer``) is declared by the plug-in
(rrma/declare.py) and checked here through the registry (:func:`check_plugins`), with the same one-line errors;
nothing here is decided by a plug-in's name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rrma.declare import Declares, OracleDeclares, SettingError
from rrma.registry import AGENTS, ORACLES, Family, agent_class, oracle_class, section_owners


class TaskError(ValueError):
    """The task file is missing, malformed or does not satisfy the schema."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


MAX_YAML_NODES = 100_000  # values a YAML document may expand to through its aliases
MAX_SECONDS = 1e9  # about 31 years: a wall-clock limit past this overflows the waits that enforce it
# Every count and size has an upper bound: a typo (100000000 for 10) is refused at load with the range,
# not found hours into a run, and the derived values stay where the code that uses them works.
MAX_MEBIBYTES = 16 * 1024 * 1024  # 16 TiB in MiB: memory and disk limits (bytes = MiB x 2**20 fit 64 bits)
MAX_PROCESSES = 4_194_304  # the kernel's PID_MAX_LIMIT: a cgroup pids.max past it means nothing
MAX_TRIALS = 100_000  # with MAX_CONFIRM repeats of each, a log's trials stay below rrma/run/seeds.py's 2,999,000
MAX_BASELINE_REPEATS = 1000  # baseline seeds stay below the agent trials' (rrma/run/seeds.py)
MAX_CONFIRM = 20
MAX_AGENT_COPIES = 100  # loop.agents_parallel: agent seeds (seed*1000 + 100*index + copy) stay distinct
MAX_AGENT_INSTANCES = 1024  # agents x loop.agents_parallel: one thread each
MAX_SEED = 2**32 - 1  # derived seeds (x 7919, + offsets) stay within what torch and numpy take


class YAMLTooLarge(yaml.YAMLError):
    """A YAML document whose aliases expand to more than MAX_YAML_NODES values (or refer to themselves)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem  # read as the other YAML errors' ``problem`` by the callers' messages


def _expanded_size(root: yaml.Node) -> int:
    """How many values the node graph becomes once every alias is copied out (memoized per node, so
    linear in the graph); YAMLTooLarge past MAX_YAML_NODES or on an alias inside its own anchor."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            sizes[id(node)] = 1
            continue
        if children_done:
            open_.discard(id(node))
            sizes[id(node)] = total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_YAML_NODES:
                raise YAMLTooLarge(f"its aliases expand to more than {MAX_YAML_NODES} values (a YAML alias bomb?); "
                                   "refused")
            continue
        if id(node) in open_:
            raise YAMLTooLarge("an alias refers to the value that contains it (a recursive alias); refused")
        open_.add(id(node))
        stack.append((node, True))
        for child in children:
            if id(child) in open_:
                raise YAMLTooLarge("an alias refers to the value that contains it (a recursive alias); refused")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def read_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text``, refusing (YAMLTooLarge, a yaml.YAMLError) a document whose
    aliases would expand past MAX_YAML_NODES values: the loader shares an aliased value, but
    everything after it (validation, error messages, run.json) walks the copies."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


class _PluginEntry(_Section):
    """A task entry that names a plug-in (the oracle, an agent): besides its own fields it holds the sections the
    plug-in declares (``oracle.scorer`` of the command oracle, ``agents[].coding`` of the coding agents). They
    are checked against the plug-in's models when the task is loaded (:func:`check_plugins`); a key the
    plug-in does not declare is an unknown field there."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, allow_inf_nan=False)

    def section(self, name: str) -> Any:
        """The plug-in section ``name`` as the task holds it (its validated model once loaded), or None."""
        return (self.model_extra or {}).get(name)

    def sections(self) -> dict[str, Any]:
        """Every plug-in section of this entry, by key."""
        return dict(self.model_extra or {})

    def _set_section(self, name: str, value: Any) -> None:
        extra = self.__pydantic_extra__
        assert extra is not None  # extra="allow": pydantic keeps a dict
        if value is None:
            extra.pop(name, None)
        else:
            extra[name] = value


class OracleConfig(_PluginEntry):
    kind: str = "command"
    """Oracle kind: a built-in oracle, a name an installed plug-in declares (rrma.oracles entry point, docs/plugins.md), or package.module:Class; `rrma-tui task-schema` lists the kinds with their params."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Oracle-specific parameters, checked against the oracle's own params model where it declares one (`rrma-tui task-schema`), part of the cache key."""
    pass_env: list[str] = Field(default_factory=list)
    """Credential-named environment variables the task's programs still receive, by name (every other credential is removed)."""

    @field_validator("pass_env")
    @classmethod
    def _variable_names(cls, names: list[str]) -> list[str]:
        bad = [n for n in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
        if bad:
            raise ValueError(f"not environment variable names: {', '.join(map(repr, bad))}")
        return names


class WorkspaceConfig(_Section):
    source: str = "workspace"
    """Directory holding the baseline files, relative to the task file."""
    editable: list[str] = Field(default_factory=list)
    """Glob patterns of files agents may edit (relative to the workspace)."""
    readonly: list[str] = Field(default_factory=list)
    """Glob patterns agents may read but never edit (wins over editable)."""


class MetricConfig(_Section):
    name: str = "score"
    """Name of the metric the oracle reports (a `name: value` line for the command oracle)."""
    direction: Literal["minimize", "maximize"] = "minimize"
    """Whether lower or higher is better."""
    target: float | None = None
    """Stop the run once the best score reaches this value (None: never)."""
    source: Literal["oracle", "self-reported"] = "oracle"
    """oracle: computed by oracle code apart from what agents edit; self-reported: printed by a program agents edit (the oracle says when its metric is: e.g. a program's own output), and every result is marked so."""


class BudgetConfig(_Section):
    trial_seconds: float = Field(60.0, gt=0, le=MAX_SECONDS)
    """Wall-clock limit of one evaluation, enforced from outside (seconds)."""
    trial_memory_mb: int = Field(2048, gt=0, le=MAX_MEBIBYTES)
    """Memory limit of one evaluation (MiB): its whole process tree by cgroup, else its process group's RSS."""
    trial_max_processes: int = Field(1024, ge=8, le=MAX_PROCESSES)
    """Processes and threads one evaluation may have at once (cgroup pids limit; not enforced by polling)."""
    max_output_bytes: int = Field(8 * 1024 * 1024, gt=0, le=64 * 2**30)
    """Output beyond this many bytes is a flood: the trial is killed and labelled crash."""
    trial_disk_mb: int = Field(4096, gt=0, le=MAX_MEBIBYTES)
    """Disk one evaluation may fill (MiB): its workspace is a file system of this size where the harness can mount (else watched), its /tmp a tmpfs of it; full, the trial is labelled disk."""
    max_trials: int = Field(20, ge=0, le=MAX_TRIALS)
    """Number of agent trials (baseline repeats not counted)."""
    max_wall_seconds: float = Field(3600.0, gt=0, le=MAX_SECONDS)
    """Stop proposing after this many seconds of run time; running trials finish."""
    max_concurrent: int = Field(1, ge=1, le=1024)
    """Trials evaluated at the same time."""
    num_cpus: float = Field(1.0, gt=0, le=4096)
    """CPUs one trial needs (a Ray resource request)."""
    num_gpus: float = Field(0.0, ge=0, le=256)
    """GPUs one trial needs (a Ray resource request)."""


class NoiseConfig(_Section):
    baseline_repeats: int = Field(3, ge=1, le=MAX_BASELINE_REPEATS)
    """How many times the unmodified baseline is evaluated (different seeds) to estimate sigma."""
    min_sigmas: float = Field(2.0, ge=0)
    """A trial is promoted only when it beats the best by at least this many sigmas."""
    min_delta: float = Field(0.0, ge=0)
    """Absolute improvement floor (used when sigma is 0, e.g. deterministic oracles)."""
    oracle_se: bool = True
    """Where the oracle reports its standard error (metrics score_se) or per-item scores (item_scores), promotion also needs min_sigmas of it (paired when both trials have item scores)."""


class EarlyAbortConfig(_Section):
    rule: Literal["off", "power-law", "sprt", "auto"] = "off"
    """Stop a trial whose progress says it cannot beat the best: power-law (curves: frac + score_est samples), sprt (item streams: items + hits), auto (whichever the samples carry)."""
    alpha: float = Field(0.05, gt=0, lt=1)
    """False-abort rate: the chance of stopping a trial that would have tied or beaten the best (over all looks)."""
    looks: list[float] = Field(default_factory=lambda: [0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8],
                               max_length=100)
    """power-law: budget fractions at which the curve is fitted and tested (increasing, in (0, 1))."""
    misfit: float = Field(0.0, ge=0)
    """power-law: allowance (metric units) x (1 - fraction seen)^2 for a curve ending better than its forecast."""
    min_fraction: float = Field(0.05, ge=0, lt=1)
    """power-law: samples before this fraction (warm-up) are not fitted."""
    sprt_delta: float = Field(0.05, gt=0, lt=1)
    """sprt: the alternative hypothesis is a hit rate this much worse than the best's."""
    sprt_beta: float = Field(0.2, gt=0, lt=1)
    """sprt: the chance of letting a trial that is worse by sprt_delta run to its end."""
    min_items: int = Field(10, ge=1, le=1_000_000)
    """sprt: items evaluated before the test may stop a trial."""

    @model_validator(mode="after")
    def _looks(self) -> EarlyAbortConfig:
        if not self.looks or any(not 0 < x < 1 for x in self.looks) or self.looks != sorted(set(self.looks)):
            raise ValueError(f"looks must be increasing budget fractions in (0, 1), got {self.looks}")
        return self


class RedTeamCheat(_Section):
    """A known cheat the per-theorem policy's ``red-team`` pseudo-agent submits (loop.red_team)."""

    proof: str = Field(min_length=1)
    """The cheating proof body, submitted as an ordinary trial of the theorem."""
    reason: str = Field(min_length=1)
    """A fragment the oracle's rejection reason must contain: a cheat rejected for another reason (a timeout) tested nothing."""


PER_THEOREM_ONLY = ("attempts_per_theorem", "theorem_seconds", "red_team", "isolated")  # loop fields of that policy
NOT_PER_THEOREM = ("confirm", "hitl")  # loop fields about promotion, which the per-theorem policy does not do


class LoopConfig(_Section):
    policy: Literal["keep-revert", "tree", "independent", "per-theorem"] = "keep-revert"
    """keep-revert: parent is the current best; tree: agent picks the parent; independent: always the baseline; per-theorem: proof benches, the oracle's theorems one at a time (rrma/run/theorems.py)."""
    top_k: int = Field(5, ge=0, le=1000)
    """Best trials shown to agents."""
    recent_k: int = Field(8, ge=0, le=1000)
    """Most recent trials (with outcomes and feedback) shown to agents."""
    history: bool = True
    """Show earlier trials and the blackboard to agents (off = single-shot control arm)."""
    lineage: bool = True
    """Show the lineage of the parent trial to agents (off for control runs)."""
    hitl: bool = False
    """Human-in-the-loop gate: a would-be new best is promoted only after a person approves it."""
    audit: Literal["hold", "flag", "off"] = "hold"
    """The auditor's rules as trials finish (docs/audit.md): hold: write findings, and a `high` one holds the trial's promotion until a person reviews it; flag: write findings only; off: none (`rrma-tui audit RUN` still runs on demand)."""
    keep_workspaces: bool = False
    """Keep each finished trial's workspace (trials/<id>/work, with what its program wrote); by default it is removed once the outcome is back (the trial's files are in the blobs)."""
    require_signed_approval: bool = False
    """With hitl: only an approval whose SSH signature verifies against loop.allowed_signers promotes (docs/foundation.md)."""
    allowed_signers: str | None = None
    """ssh-keygen allowed_signers file (relative to the task file) that signed approvals are checked against."""
    agents_parallel: int = Field(1, ge=1, le=MAX_AGENT_COPIES)
    """Number of agent instances (each agents[] entry is replicated, names suffixed -1, -2...)."""
    confirm: int = Field(0, ge=0, le=MAX_CONFIRM)
    """Re-evaluate a would-be new best this many times with fresh seeds; promote it only if the mean of those repeats still clears the floor (0: off)."""
    early_abort: EarlyAbortConfig = Field(default_factory=EarlyAbortConfig)
    """Early abort of trials that report progress (docs/experiments.md)."""
    attempts_per_theorem: int = Field(40, ge=1, le=10_000)
    """per-theorem: agent trials per theorem before the next one (the red team's trial is not one of them)."""
    theorem_seconds: float = Field(30.0, ge=0, le=MAX_SECONDS)
    """per-theorem: wall-clock seconds per theorem, proposing and checking (read from the log: a resumed run keeps what it used)."""
    red_team: list[RedTeamCheat] = Field(default_factory=list, max_length=100)
    """per-theorem: known cheats; a `red-team` pseudo-agent submits one per theorem (in turn) before the agents (empty: none)."""
    isolated: bool = False
    """per-theorem control arm: agents see neither the blackboard nor each other's trials (compare attempts per solved theorem)."""

    @field_validator("audit", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        """YAML reads a bare ``off`` as false (and ``on`` as true): take them as the words they were."""
        if value is False:
            return "off"
        if value is True:
            return "hold"
        return value

    @model_validator(mode="after")
    def _per_theorem(self) -> LoopConfig:
        """The per-theorem fields mean nothing under another policy, and promotion's fields nothing under it:
        a task that sets them says something the run would not do."""
        if self.policy != "per-theorem":
            # by value, not by what the YAML named: a run.json snapshot names every field with its default
            given = [f"loop.{f}" for f in PER_THEOREM_ONLY
                     if getattr(self, f) != type(self).model_fields[f].get_default(call_default_factory=True)]
            if given:
                raise ValueError(f"{', '.join(given)}: only the per-theorem policy uses it (policy is {self.policy})")
        else:
            given = [f"loop.{f}" for f in NOT_PER_THEOREM if getattr(self, f)]
            if given or self.early_abort.rule != "off":
                given += ["loop.early_abort"] if self.early_abort.rule != "off" else []
                raise ValueError(f"{', '.join(given)}: the per-theorem policy promotes nothing (a trial scores 1.0 "
                                 "when its proof is accepted), so there is nothing to confirm, review or abort early")
        return self

    @model_validator(mode="after")
    def _signed_approval(self) -> LoopConfig:
        if self.require_signed_approval and not self.hitl:
            raise ValueError("require_signed_approval needs hitl: true (without the gate nothing waits for approval)")
        if self.require_signed_approval and not self.allowed_signers:
            raise ValueError("require_signed_approval needs allowed_signers: the ssh-keygen allowed_signers file "
                             "signatures are checked against")
        return self


class RewardConfig(_Section):
    """How one trial's outcome becomes a training reward (rrma/train/reward.py; docs/training.md)."""

    reference: Literal["parent", "baseline"] = "parent"
    """Improvement over what: the trial's parent (what the agent built on) or the run's baseline."""
    scale: Literal["sigma", "relative"] = "sigma"
    """sigma: the improvement in units of the baseline's noise (sigma; the floor when sigma is 0); relative: as a fraction of |reference|."""
    clip: float = Field(5.0, gt=0)
    """The scaled improvement is clipped to [-clip, clip] (one huge win must not swamp a group)."""
    crash: float = 0.0
    """Reward of a trial that crashed, timed out, ran out of memory or disk, or was aborted."""
    invalid: float = 0.0
    """Reward of an edit the harness refused, or one the oracle rejected."""
    duplicate: float | None = 0.0
    """Reward of a repeat of an earlier trial (a cached outcome); null: score it like any other."""
    efficiency: float = Field(0.0, ge=0)
    """Weight of the time bonus: minus efficiency x seconds / budget.trial_seconds."""
    memory: float = Field(0.0, ge=0)
    """Weight of the memory bonus: minus memory x peak_rss_mb / budget.trial_memory_mb (when the oracle records it)."""
    novelty: float = Field(0.0, ge=0)
    """Weight of the novelty bonus: plus novelty x (1 - the most similar earlier diff's similarity)."""


class AgentConfig(_PluginEntry):
    name: str = "agent"
    """Agent name (unique within the run; appears as actor agent:<name>)."""
    backend: str = "random-search"
    """Agent backend: a built-in backend (docs/agents.md), a name an installed plug-in declares (rrma.agents entry point, docs/plugins.md), or package.module:Class; `rrma-tui task-schema` lists the backends with their settings."""
    model: str | None = None
    """Model name for LLM backends; for local and policy a model of the model store by name (smollm2) or a directory."""
    base_url: str | None = None
    """Endpoint for OpenAI-compatible servers (vLLM) or an Anthropic-compatible proxy."""
    max_tokens: int = Field(4096, gt=0, le=1_000_000)
    """Output tokens per model call."""
    temperature: float = Field(0.7, ge=0)
    """Sampling temperature."""
    role: str | None = None
    """Specialist role (e.g. optimizer, architecture, data): shown to the agent, restricts its edits."""
    editable: list[str] | None = None
    """Subset of the workspace's editable globs this agent may touch (None: all)."""
    search_keys: list[str] | None = None
    """Subset of search_space keys this agent mutates (random search; None: all)."""
    budget_usd: float | None = Field(None, ge=0)
    """Hard cap on model cost for this agent over the run (None: no cap)."""
    max_run_tokens: int | None = Field(None, ge=0, le=10**12)
    """Hard cap on tokens (in + out) for this agent over the run (None: no cap)."""
    max_failures: int = Field(3, ge=1, le=1000)
    """Consecutive failed proposals (an error raised by the agent, e.g. an API failure after its retries) before it is retired for the run."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Backend-specific options, checked against the backend's own params model where it declares one."""


class SearchDim(_Section):
    kind: Literal["log_uniform", "uniform", "int", "choice"] = "uniform"
    """Distribution of the sampled value."""
    low: float | None = None
    """Lower bound (log_uniform, uniform, int)."""
    high: float | None = None
    """Upper bound (inclusive for int)."""
    choices: list[Any] | None = None
    """Values to pick from (choice)."""

    @model_validator(mode="after")
    def _check(self) -> SearchDim:
        if self.kind == "choice":
            if not self.choices:
                raise ValueError("choice needs a non-empty 'choices' list")
        else:
            if self.low is None or self.high is None:
                raise ValueError(f"{self.kind} needs both 'low' and 'high'")
            if self.low > self.high:
                raise ValueError(f"low ({self.low}) is greater than high ({self.high})")
            if self.kind == "log_uniform" and self.low <= 0:
                raise ValueError("log_uniform needs low > 0")
        return self


_SEARCH_KEY = re.compile(r"^[^:]+:[A-Za-z_][A-Za-z0-9_]*$")


class TaskConfig(_Section):
    name: str
    """Short task name (used in run ids)."""
    description: str = ""
    """What the agents are asked to do (shown to them verbatim)."""
    oracle: OracleConfig = Field(default_factory=OracleConfig)
    """Which oracle judges trials, and its parameters."""
    workspace: WorkspaceConfig = Field(default_factory=WorkspaceConfig)
    """Baseline files and what agents may edit."""
    metric: MetricConfig = Field(default_factory=MetricConfig)
    """The metric and its direction."""
    budget: BudgetConfig = Field(default_factory=BudgetConfig)
    """Per-trial limits and run-level stopping rules."""
    noise: NoiseConfig = Field(default_factory=NoiseConfig)
    """Noise floor estimation and the promotion threshold."""
    loop: LoopConfig = Field(default_factory=LoopConfig)
    """Search policy and what agents see."""
    agents: list[AgentConfig] = Field(default_factory=lambda: [AgentConfig()], max_length=MAX_AGENT_INSTANCES)
    """The agents of the run."""
    search_space: dict[str, SearchDim] = Field(default_factory=dict)
    """For random search: 'file:CONSTANT' -> distribution."""
    seed: int = Field(0, ge=0, le=MAX_SEED)
    """Run seed (agents and baseline repeats derive theirs from it)."""
    bench: dict[str, Any] = Field(default_factory=dict)
    """Bench-specific settings (e.g. per-theorem attempts for proof benches)."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """How a trial's outcome becomes a training reward (rrma-tui train, export --dataset; docs/training.md)."""

    # set by load_task, not part of the YAML
    base_dir: Path | None = Field(default=None, exclude=True)
    """Directory of the task file (paths are relative to it)."""

    @field_validator("search_space")
    @classmethod
    def _keys(cls, value: dict[str, SearchDim]) -> dict[str, SearchDim]:
        for key in value:
            if not _SEARCH_KEY.match(key):
                raise ValueError(f"search_space key {key!r} must look like 'file.py:CONSTANT_NAME'")
        return value

    @model_validator(mode="after")
    def _agents_unique(self) -> TaskConfig:
        names = [a.name for a in self.agents]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"agent names must be unique; repeated: {', '.join(dupes)}")
        instances = len(self.agents) * self.loop.agents_parallel
        if instances > MAX_AGENT_INSTANCES:
            raise ValueError(f"agents x loop.agents_parallel: {len(self.agents)} x {self.loop.agents_parallel} = "
                             f"{instances} agent instances; allowed: at most {MAX_AGENT_INSTANCES} (one thread each)")
        return self

    def workspace_dir(self) -> Path:
        base = self.base_dir or Path.cwd()
        return (base / self.workspace.source).resolve()

    def allowed_signers_path(self) -> Path | None:
        """loop.allowed_signers resolved against the task file's directory (None when unset)."""
        return task_path(self.base_dir, self.loop.allowed_signers) if self.loop.allowed_signers else None

    def snapshot(self) -> dict[str, Any]:
        """The config as plain JSON (for run.json and the run.started event)."""
        data = self.model_dump(mode="json")
        data["base_dir"] = str(self.base_dir) if self.base_dir else None
        return data

    def better(self, a: float, b: float) -> float:
        """Signed improvement of score ``a`` over ``b`` (> 0 means ``a`` is better)."""
        return (b - a) if self.metric.direction == "minimize" else (a - b)


def self_reported_reason(task: TaskConfig, oracle: type[OracleDeclares] | None) -> str | None:
    """Why the task's metric is what a program agents edit prints, in the words of its ``oracle`` class (its
    :meth:`~rrma.declare.OracleDeclares.self_reported`), or None when the oracle computes it."""
    return oracle.self_reported(task.oracle, task.metric.name) if oracle is not None else None


def is_self_reported(snapshot: dict[str, Any] | None) -> bool:
    """Whether a run's recorded task (run.json, run.started) says its metric is self-reported.

    Read from the recorded ``metric.source``: runs recorded before the field existed are not marked."""
    metric = (snapshot or {}).get("metric")
    return isinstance(metric, dict) and metric.get("source") == "self-reported"


def check_metric_source(task: TaskConfig, *, source: str, oracle: type[OracleDeclares] | None) -> None:
    """A metric that a program agents edit prints is never labelled ``oracle`` (TaskError naming the file and
    the field); what else the oracle's settings require of the task is its own rule (``check_task``)."""
    reason = self_reported_reason(task, oracle)
    if reason is not None and task.metric.source != "self-reported":
        raise TaskError(f"{source}: metric.source: {reason}")


def check_plugins(task: TaskConfig, *, source: str) -> type[OracleDeclares] | None:
    """Check the task's oracle and agents against what their plug-ins declare (rrma/declare.py): ``params``
    against the plug-in's params model, each further key against the section model it declares (the validated
    model replaces the raw value), then the plug-in's ``settle`` and ``check_task`` hooks. A TaskError names the
    file and the field. A name that does not resolve here is left to the run's start, which reports it. Returns
    the oracle's class (None when its kind does not resolve here), resolved once: a lookup reads the installed
    distributions' entry points."""
    oracle = oracle_class(task.oracle.kind)
    entries: list[tuple[str, OracleConfig | AgentConfig, Family, type[Declares] | None]] = [
        ("oracle", task.oracle, ORACLES, oracle)]
    for index, agent in enumerate(task.agents):
        # an agent's module is imported only when there is something of its own to check (an SDK can be slow)
        cls = agent_class(agent.backend) if agent.params or agent.sections() else None
        entries.append((f"agents.{index}", agent, AGENTS, cls))
    for where, entry, family, cls in entries:
        name = entry.kind if isinstance(entry, OracleConfig) else entry.backend
        if cls is not None and cls.params_model is not None:
            _validate(cls.params_model, entry.params, source, (*where.split("."), "params"))
        declared = cls.sections if cls is not None else {}
        for key, value in entry.sections().items():
            model = declared.get(key)
            if model is not None:
                entry._set_section(key, _validate(model, value, source, (*where.split("."), key)))
            elif _recorded_default(family, key, value):
                entry._set_section(key, None)
            else:
                raise TaskError(_undeclared(source, where, key, family, name))
        if cls is not None:
            try:
                cls.settle(entry)
                cls.check_task(task)
            except SettingError as exc:
                raise TaskError(f"{source}: {exc}") from None
    return oracle


def _validate(model: type[BaseModel], value: Any, source: str, loc: tuple[str, ...]) -> BaseModel:
    """``value`` as a plug-in's ``model``; a TaskError naming each wrong field from the task's top."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise TaskError(_format_error(source, exc, root=model, prefix=tuple(int(p) if p.isdigit() else p
                                                                           for p in loc))) from None


def _recorded_default(family: Family, key: str, value: Any) -> bool:
    """Whether ``value`` is the untouched default of section ``key`` as a plug-in of ``family`` declares it:
    what a task recorded before sections were the plug-ins' own (every run.json named every section) holds,
    and a task may still write (``oracle.scorer: {}``). Plug-ins are imported in name order until one fits."""
    for _name, model in section_owners(family, key):
        try:
            if model.model_validate(value) == model():
                return True
        except (ValidationError, TypeError):
            continue
    return False


def _undeclared(source: str, where: str, key: str, family: Family, name: str) -> str:
    """The error for a section the named plug-in does not declare: which plug-ins take it, or an unknown field."""
    owners = list(section_owners(family, key))
    if not owners:
        return f"{source}: {where}.{key}: unknown field (check the spelling; `rrma-tui task-schema` lists the fields)"
    noun = family.noun.split()[0]  # oracle, agent
    model = owners[0][1]
    text = getattr(model, "only_for", "only the {owners} {noun} takes it (the {name} {noun} does not)")
    return f"{source}: {where}.{key}: " + text.format(owners=", ".join(n for n, _m in owners), noun=noun, name=name)


_BOUND_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_long", "too_short"})


def _format_error(source: str, exc: ValidationError, *, root: type[BaseModel] | None = None,
                  prefix: tuple[int | str, ...] = ()) -> str:
    """One line per problem: the file, the field's dotted path from the task's top (``prefix`` + the error's
    place in ``root``, the task table or a plug-in's model), what is wrong, the value and the allowed range."""
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (*prefix, *err["loc"])) or "(top level)"
        got = err.get("input")
        shown = "" if isinstance(got, dict) or got is None else f" (got {got!r})"
        if isinstance(got, list) and err["type"] in ("too_long", "too_short"):
            shown = f" (got {len(got)})"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `rrma-tui task-schema` lists the fields)"
            shown = ""
        allowed = allowed_range(_field_at(err["loc"], root or TaskConfig)) if err["type"] in _BOUND_ERRORS else ""
        lines.append(f"{source}: {loc}: {msg}{shown}" + (f"; allowed: {allowed}" if allowed else ""))
    return "\n".join(lines)


def _field_at(loc: tuple[int | str, ...], root: type[BaseModel]) -> Any:
    """The FieldInfo of the field of ``root`` at an error's ``loc`` (None when the path leaves the table)."""
    model: Any = root
    info = None
    for part in loc:
        if isinstance(part, int) or model is None:  # an item of a list: its model is the list's item type
            continue
        info = model.model_fields.get(str(part)) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if info is None:
            return None
        ann = info.annotation
        args = getattr(ann, "__args__", ())
        if getattr(ann, "__origin__", None) in (list, dict) and args:
            ann = args[-1]  # the item (list) or value (dict) type
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    return info


def allowed_range(info: Any) -> str:
    """A field's bounds in words (``from 1 to 1000``, ``above 0, up to 1e+09``, ``at most 100 entries``); "" if none."""
    if info is None:
        return ""
    bounds: dict[str, Any] = {}
    for item in info.metadata:
        for name in ("gt", "ge", "lt", "le", "min_length", "max_length"):
            value = getattr(item, name, None)
            if value is not None:
                bounds[name] = value

    def num(value: Any) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"

    low = f"from {num(bounds['ge'])}" if "ge" in bounds else f"above {num(bounds['gt'])}" if "gt" in bounds else ""
    high = f"to {num(bounds['le'])}" if "le" in bounds else f"below {num(bounds['lt'])}" if "lt" in bounds else ""
    if low and high:
        return f"{low}{',' if high.startswith('below') or low.startswith('above') else ''} {high}".replace(
            ", to ", ", up to ")
    if low or high:
        return {"from": "at least", "above": "above", "to": "at most", "below": "below"}[
            (low or high).split()[0]] + " " + (low or high).split(" ", 1)[1]
    if "max_length" in bounds or "min_length" in bounds:
        lo, hi = bounds.get("min_length"), bounds.get("max_length")
        unit = "characters" if info.annotation is str else "entries"
        if lo and hi is not None:
            return f"from {lo} to {hi} {unit}"
        return f"at most {hi} {unit}" if hi is not None else f"at least {lo} {unit}"
    return ""


def task_from_dict(data: Any, *, source: str = "<task>", base_dir: Path | None = None) -> TaskConfig:
    """A task from its fields (a parsed YAML file, a run.json snapshot), checked; TaskError naming the field."""
    return _checked(data, source=source, base_dir=base_dir)[0]


def _checked(data: Any, *, source: str, base_dir: Path | None) -> tuple[TaskConfig, type[OracleDeclares] | None]:
    """The checked task and its oracle's class (None when its kind does not resolve here)."""
    if not isinstance(data, dict):
        raise TaskError(f"{source}: expected a mapping of task fields at the top level, got {type(data).__name__}")
    try:
        task = TaskConfig.model_validate(data)
    except ValidationError as exc:
        raise TaskError(_format_error(source, exc)) from None
    task.base_dir = base_dir
    oracle = check_plugins(task, source=source)
    # a metric a program agents edit prints is self-reported where the task does not say (a task file must say
    # so explicitly: load_task)
    if "source" not in task.metric.model_fields_set and self_reported_reason(task, oracle) is not None:
        task.metric.source = "self-reported"
    check_metric_source(task, source=source, oracle=oracle)
    return task, oracle


def load_task(path: Path | str, overrides: dict[str, Any] | None = None) -> TaskConfig:
    """Load and validate a task YAML file; ``overrides`` are dotted keys (``budget.max_trials``)."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"{path}: no such task file")
    if path.is_dir():
        raise TaskError(f"{path}: is a directory, not a task YAML file")
    if not path.is_file():
        raise TaskError(f"{path}: not a regular file (a task is a YAML file)")
    try:
        data = read_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TaskError(f"{path}: cannot read the task file: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f": line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TaskError(f"{path}{where}: malformed YAML: {problem}") from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if data is None:
        raise TaskError(f"{path}: the file is empty; a task needs at least a 'name'")
    if not isinstance(data, dict):
        raise TaskError(f"{path}: expected a mapping of task fields at the top level, got {type(data).__name__}")
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    task, oracle = _checked(data, source=str(path), base_dir=path.parent.resolve())
    ws = task.workspace_dir()
    if not ws.is_dir() and (oracle is None or oracle.needs_workspace):  # a proof bench's theorems come from the oracle
        raise TaskError(f"{path}: workspace.source: directory {ws} does not exist")
    if ws.is_dir():
        check_workspace(ws, source=str(path))
    if oracle is not None:
        try:
            oracle.check_files(task, ws)
        except SettingError as exc:
            raise TaskError(f"{path}: {exc}") from None
    metric = data.get("metric")
    reason = self_reported_reason(task, oracle)
    if reason is not None and not (isinstance(metric, dict) and "source" in metric):
        raise TaskError(f"{path}: metric.source: missing; {reason}")
    signers = task.allowed_signers_path()
    if signers is not None and not signers.is_file():
        raise TaskError(f"{path}: loop.allowed_signers: file {signers} does not exist")
    return task


def task_path(base_dir: Path | None, value: str) -> Path:
    """A path named by a task field: ``~`` expanded, relative to the task file's directory."""
    return ((base_dir or Path.cwd()) / Path(value).expanduser()).resolve()


def check_workspace(ws: Path, *, source: str) -> None:
    """Read the workspace as the run will (text files only, no symlink out of it): a binary file or
    an escaping link is a TaskError here, before a run directory exists, not an error mid-run."""
    from rrma.workspace import InvalidEdit, read_tree

    try:
        read_tree(ws)
    except InvalidEdit as exc:
        raise TaskError(f"{source}: workspace.source: {exc}") from None
    except (OSError, RuntimeError) as exc:  # unreadable file, symlink loop
        raise TaskError(f"{source}: workspace.source: cannot read {ws}: {exc}") from None


def set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    """Set ``data[a][b][c] = value`` for the key ``a.b.c``; TaskError (naming the key) when a part
    is empty or names a value that is not a mapping (``name.first`` where ``name`` is a string)."""
    parts = key.split(".")
    if not all(p.strip() for p in parts):
        raise TaskError(f"override {key!r}: empty field name in the dotted key")
    node: Any = data
    for depth, part in enumerate(parts[:-1]):
        if node.get(part) is None:  # absent, or an empty `section:` in the YAML
            node[part] = {}
        node = node[part]
        if not isinstance(node, dict):
            where = ".".join(parts[: depth + 1])
            raise TaskError(f"override {key!r}: {where} is a {type(node).__name__}, not a section with sub-fields")
    node[parts[-1]] = value
