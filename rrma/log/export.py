"""SQLite export of run logs through sqlite-utils (opens in datasette).

Tables: ``runs`` (one row per run), ``trials``, ``events``, ``blackboard``, ``turns``, ``reviews``,
``audit_findings`` (one row per ``audit.finding`` the fold counts: kind, severity, source, rule,
explanation, ``evidence`` as JSON ``[{seq, quote}]``, ``held``, the judge's ``model`` and
``prompt_version``, and the reviewer's dismissal if any: ``dismissed_seq``, ``dismissed_by``,
``dismissed_note``; docs/audit.md) and ``experiments`` (one row per cell of an experiment: arm, seed, the cell's run and its final
best and cost; the view ``experiment_arms`` sums them up per arm), each keyed by ``run_id`` (or the
experiment id) plus its own id, with foreign keys to ``runs``, indexes on the columns people filter
by, and full-text search on blackboard and turn text (rebuilt after each export that changed
something). ``meta`` holds the schema version. Confirmation repeats are trials with ``confirms``
set; the trial they confirm carries ``confirmed`` and ``confirmed_score``; a trial the loop
stopped early carries ``early_abort`` (the rule).

``runs.metric_source`` says where a run's scores came from: ``oracle``, or ``self-reported``
(printed by the trial's own, agent-edited program; rrma/task.py ``metric.source``); empty for logs
recorded before the field existed.

Idempotence: a run whose last event hash is already recorded in ``runs`` is skipped entirely, so
re-exporting an unchanged run changes nothing (not a byte of the tables); a run that grew is
replaced row for row (its rows deleted, then inserted again). Several runs share one file.

Speed (``benches/perf/bench_export.py``): every line goes through the log's one decoder
(:mod:`rrma.log.codec`: orjson and a type check compiled from the event models; a line that fails
it goes through pydantic, which coerces it as the core would or drops it as a torn line, as
``RunStore.scan`` does); ``agent.turn`` events (most of a long run) become turn rows, the others
are folded through :class:`rrma.log.state.RunState` as everywhere else. ``events.data_json`` is the
event's payload exactly as the log holds it (the canonical JSON that was hashed), cut out of the
line. Rows go in with one ``executemany`` per table.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import sqlite_utils

from rrma.log.codec import InvalidEvent, LogEvent, decode_line
from rrma.log.state import RunState
from rrma.log.store import RunStore
from rrma.log.tail import LineTail

EXPORT_SCHEMA_VERSION = 1


class ExportError(Exception):
    """The target database cannot be used: a missing directory, not SQLite, unwritable, or an
    incompatible export schema version."""


@dataclass
class ExportResult:
    run_id: str
    events: int
    trials: int
    skipped: bool  # unchanged since the last export


RUN_COLUMNS: dict[str, Any] = {
    "run_id": str, "task_name": str, "status": str, "finish_reason": str, "started": str, "finished": str,
    "seed": int, "baseline": float, "sigma": float, "best_trial": str, "best_score": float,
    "delta_sigma": float, "trials": int, "events": int, "last_seq": int, "last_hash": str, "task_json": str,
    "experiment_id": str, "arm": str, "tokens_in": int, "tokens_out": int, "cost_usd": float,
    "compute_seconds": float, "confirmation_repeats": int, "early_aborts": int, "metric_source": str,
}
TABLES: dict[str, tuple[dict[str, Any], tuple[str, ...], list[str]]] = {
    "trials": ({
        "run_id": str, "trial_id": str, "parent": str, "agent": str, "status": str, "score": float,
        "delta": float, "delta_sigma": float, "seconds": float, "hypothesis": str, "feedback": str,
        "cached": int, "cached_from": str, "baseline": int, "promoted": int, "review_status": str,
        "theorem": str, "metrics_json": str, "proposed_ts": str, "finished_ts": str,
        "confirms": str, "confirmed": int, "confirmed_score": float, "floor": float, "floor_source": str,
        "early_abort": str,
    }, ("run_id", "trial_id"), ["status", "agent", "score", "review_status"]),
    "events": ({"run_id": str, "seq": int, "ts": str, "kind": str, "actor": str, "data_json": str,
                "prev": str, "hash": str}, ("run_id", "seq"), ["kind", "actor", "ts"]),
    "blackboard": ({"run_id": str, "seq": int, "ts": str, "agent": str, "trial_id": str, "text": str,
                    "tags": str}, ("run_id", "seq"), ["agent", "trial_id"]),
    "turns": ({"run_id": str, "seq": int, "ts": str, "agent": str, "step": int, "role": str, "trial_id": str,
               "tool": str, "text": str, "args_json": str, "result": str, "tokens_in": int, "tokens_out": int,
               "cache_read": int, "latency_s": float, "cost_usd": float, "model": str},
              ("run_id", "seq"), ["agent", "role", "trial_id", "tool"]),
    "reviews": ({"run_id": str, "seq": int, "ts": str, "trial_id": str, "decision": str, "reviewer": str,
                 "note": str, "supersedes": int}, ("run_id", "seq"), ["trial_id", "decision", "reviewer"]),
    "audit_findings": ({"run_id": str, "seq": int, "finding_id": str, "trial_id": str, "kind": str, "severity": str,
                        "source": str, "rule": str, "explanation": str, "evidence": str, "held": int, "model": str,
                        "prompt_version": str, "dismissed_seq": int, "dismissed_by": str, "dismissed_note": str},
                       ("run_id", "seq"), ["trial_id", "kind", "severity"]),
}
EXPERIMENT_COLUMNS: dict[str, Any] = {
    "experiment_id": str, "arm": str, "seed": int, "run_id": str, "finish_reason": str, "direction": str,
    "baseline": float, "final_best": float, "improvement": float, "trials": int, "wall_seconds": float,
    "tokens_in": int, "tokens_out": int, "cost_usd": float, "compute_seconds": float,
}
ARMS_VIEW = """CREATE VIEW IF NOT EXISTS experiment_arms AS
SELECT experiment_id, arm, count(*) AS cells, avg(final_best) AS mean_final_best, min(final_best) AS min_final_best,
       max(final_best) AS max_final_best, avg(improvement) AS mean_improvement, sum(trials) AS trials,
       sum(tokens_in) AS tokens_in, sum(tokens_out) AS tokens_out, sum(cost_usd) AS cost_usd,
       sum(compute_seconds) AS compute_seconds
FROM experiments GROUP BY experiment_id, arm"""


def _ensure_schema(db: sqlite_utils.Database) -> None:
    meta = db["meta"]
    if meta.exists():  # type: ignore[union-attr]
        row = {r["key"]: r["value"] for r in meta.rows}  # type: ignore[union-attr]
        found = int(row.get("schema_version", EXPORT_SCHEMA_VERSION))
        if found != EXPORT_SCHEMA_VERSION:
            raise ExportError(f"{db.conn}: export schema version {found}, this rrma writes {EXPORT_SCHEMA_VERSION}")
    else:
        db["meta"].insert({"key": "schema_version", "value": str(EXPORT_SCHEMA_VERSION)}, pk="key")  # type: ignore[union-attr]
    runs = db["runs"]
    if not runs.exists():  # type: ignore[union-attr]
        runs.create(RUN_COLUMNS, pk="run_id")  # type: ignore[union-attr]
    else:
        _add_missing(runs, RUN_COLUMNS)
    for name, (columns, pk, indexes) in TABLES.items():
        table = db[name]
        if table.exists():  # type: ignore[union-attr]
            _add_missing(table, columns)  # a column added since the database was made (reviews.supersedes)
            continue
        table.create(columns, pk=pk, foreign_keys=[("run_id", "runs", "run_id")])  # type: ignore[union-attr]
        for column in indexes:  # (run_id, ...) is the primary key: queries by run use it, no index of its own
            table.create_index([column], if_not_exists=True)  # type: ignore[union-attr]
    experiments = db["experiments"]
    if not experiments.exists():  # type: ignore[union-attr]
        experiments.create(EXPERIMENT_COLUMNS, pk=("experiment_id", "arm", "seed"),  # type: ignore[union-attr]
                           foreign_keys=[("run_id", "runs", "run_id")])
        experiments.create_index(["run_id"], if_not_exists=True)  # type: ignore[union-attr]
    else:
        _add_missing(experiments, EXPERIMENT_COLUMNS)
    db.execute(ARMS_VIEW)
    for name, searchable in (("blackboard", ["text"]), ("turns", ["text", "result"])):
        if not db[f"{name}_fts"].exists():  # type: ignore[union-attr]
            # no triggers: per-row FTS triggers make bulk inserts ~10x slower; rebuilt after each export
            db[name].enable_fts(searchable, create_triggers=False)  # type: ignore[union-attr]


def _add_missing(table: Any, columns: dict[str, Any]) -> None:
    have = table.columns_dict
    for column, kind in columns.items():
        if column not in have:
            table.add_column(column, kind)


def _metric_source(task: dict[str, Any]) -> str | None:
    """The run's recorded ``metric.source`` (oracle, self-reported; None in logs older than the field)."""
    metric = task.get("metric")
    source = metric.get("source") if isinstance(metric, dict) else None
    return source if isinstance(source, str) else None


def _j(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, ensure_ascii=False)


# ----------------------------------------------------------------------------- reading the log


TURN_COLUMNS = ["run_id", "seq", "ts", "agent", "step", "role", "trial_id", "tool", "text", "args_json", "result",
                "tokens_in", "tokens_out", "cache_read", "latency_s", "cost_usd", "model"]


@dataclass
class _Log:
    """A run log as the export needs it: folded state, event rows and turn rows."""

    events: list[tuple[Any, ...]] = field(default_factory=list)  # (seq, ts, kind, actor, data_json, prev, hash)
    turns: list[tuple[Any, ...]] = field(default_factory=list)  # TURN_COLUMNS without run_id
    folded: list[LogEvent] = field(default_factory=list)  # the other events, for RunState
    last_hash: str = ""


def _data_json(line: bytes, event: LogEvent) -> str:
    """The payload as the log holds it: the canonical JSON between ``"data":`` and ``,"hash":``."""
    start = line.find(b'"data":')
    end = line.rfind(b',"hash":"')
    if line.startswith(b'{"actor":') and start != -1 and end > start:
        return line[start + 7 : end].decode("utf-8")
    payload = event.data.model_dump(mode="json")  # a line not written by rrma
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode("utf-8")


def _args_json(args: Any) -> str | None:
    return None if args is None else orjson.dumps(args, option=orjson.OPT_SORT_KEYS).decode("utf-8")


def read_log(store: RunStore) -> _Log:
    """Every complete, valid line of the run's log (torn and invalid lines are skipped, as ``scan`` does)."""
    out = _Log()
    path = store.events_path
    if not path.exists():
        return out
    for offset, line in LineTail(path).lines():  # complete lines only: an unterminated last line is torn
        if not line.strip():
            continue
        try:
            event = decode_line(line, offset)
        except InvalidEvent:  # torn, invalid, or bytes that are not UTF-8: skipped as scan skips them
            continue
        if event.kind == "agent.turn":
            d = event.data
            out.turns.append((event.seq, event.ts, d.agent, d.step, d.role, d.trial_id, d.tool, d.text,
                              _args_json(d.args), d.result, d.tokens_in, d.tokens_out, d.cache_read, d.latency_s,
                              d.cost_usd, d.model))
        else:
            out.folded.append(event)
        out.events.append((event.seq, event.ts, event.kind, event.actor, _data_json(line, event), event.prev,
                           event.hash))
        out.last_hash = event.hash
    return out


# ----------------------------------------------------------------------------- export


def export_run(db: sqlite_utils.Database, run_dir: Path) -> ExportResult:
    store = RunStore(run_dir)
    run_id = store.run_id
    head_seq, head_hash = store.head()
    existing = db.execute("SELECT last_hash, events FROM runs WHERE run_id = ?", [run_id]).fetchone()
    if existing is not None and existing[0] == (head_hash if head_seq >= 0 else ""):
        return ExportResult(run_id, int(existing[1]), 0, skipped=True)
    log = read_log(store)
    state = RunState.fold(log.folded)  # agent.turn events only count turns per agent: not exported from state
    summary_best = state.best_history[-1][1] if state.best_history else None
    tokens_in = sum(t[10] for t in log.turns)
    tokens_out = sum(t[11] for t in log.turns)
    cost = round(math.fsum(t[14] for t in log.turns), 8)
    compute = round(sum(t.seconds for t in state.trials.values()), 4)
    experiment = state.experiment or {}
    with db.conn:  # one transaction per run
        for table in ("experiments", *TABLES, "runs"):  # children first: the foreign keys stay valid
            db.execute(f"DELETE FROM [{table}] WHERE run_id = ?", [run_id])
        _insert(db, "runs", [{
            "run_id": run_id, "task_name": state.task_name, "status": state.status, "finish_reason": state.finish_reason,
            "started": state.started_ts, "finished": state.finished_ts or None, "seed": state.seed,
            "baseline": state.baseline_mean, "sigma": state.sigma, "best_trial": state.best_id,
            "best_score": summary_best, "delta_sigma": state.delta_sigma_of(summary_best),
            "trials": len(state.agent_trials()), "events": len(log.events), "last_seq": log.events[-1][0] if log.events
            else -1, "last_hash": log.last_hash, "task_json": _j(state.task), "experiment_id": experiment.get("id"),
            "arm": experiment.get("arm"), "tokens_in": tokens_in, "tokens_out": tokens_out, "cost_usd": cost,
            "compute_seconds": compute, "confirmation_repeats": len(state.confirmation_trials()),
            "early_aborts": sum(1 for t in state.agent_trials() if t.early_abort is not None),
            "metric_source": _metric_source(state.task),
        }])
        trials = [{
            "run_id": run_id, "trial_id": t.trial_id, "parent": t.parent, "agent": t.agent, "status": t.status,
            "score": t.score, "delta": t.delta, "delta_sigma": t.delta_sigma, "seconds": t.seconds,
            "hypothesis": t.hypothesis, "feedback": t.feedback, "cached": int(t.cached), "cached_from": t.cached_from,
            "baseline": int(t.baseline), "promoted": int(t.promoted), "review_status": t.review_status,
            "theorem": t.theorem, "metrics_json": _j(t.metrics), "proposed_ts": t.proposed_ts,
            "finished_ts": t.finished_ts or None, "confirms": t.confirms,
            "confirmed": None if t.confirmation is None else int(t.confirmation["confirmed"]),
            "confirmed_score": t.confirmed_score, "floor": t.floor, "floor_source": t.floor_source,
            "early_abort": None if t.early_abort is None else t.early_abort.get("rule"),
        } for t in (state.trials[i] for i in state.order)]
        _insert(db, "trials", trials)
        _insert_tuples(db, "events", ["run_id", "seq", "ts", "kind", "actor", "data_json", "prev", "hash"],
                       ((run_id, *e) for e in log.events), count=len(log.events))
        _insert(db, "blackboard", ({
            "run_id": run_id, "seq": e.seq, "ts": e.ts, "agent": e.data.agent, "trial_id": e.data.trial_id,
            "text": e.data.text, "tags": _j(e.data.tags)} for e in log.folded if e.kind == "blackboard.post"))
        _insert_tuples(db, "turns", TURN_COLUMNS, ((run_id, *t) for t in log.turns), count=len(log.turns))
        _insert(db, "reviews", ({
            "run_id": run_id, "seq": e.seq, "ts": e.ts, "trial_id": e.data.trial_id, "decision": e.data.decision,
            "reviewer": e.data.reviewer, "note": e.data.note, "supersedes": e.data.supersedes}
            for e in log.folded if e.kind == "review"))
        _insert(db, "audit_findings", (finding_row(run_id, f) for f in state.findings))
        if experiment.get("id") and experiment.get("arm") is not None:
            _insert(db, "experiments", [experiment_row(state, run_id, tokens_in, tokens_out, cost, compute)])
    return ExportResult(run_id, len(log.events), len(trials), skipped=False)


def finding_row(run_id: str, finding: dict[str, Any]) -> dict[str, Any]:
    """The ``audit_findings`` row of one folded finding (rrma/log/state.py ``RunState.findings``)."""
    dismissed = finding.get("dismissed") or {}
    return {"run_id": run_id, "seq": finding["seq"], "finding_id": finding["finding_id"],
            "trial_id": finding["trial_id"], "kind": finding["kind"], "severity": finding["severity"],
            "source": finding["source"], "rule": finding.get("rule"), "explanation": finding["explanation"],
            "evidence": json.dumps(finding.get("evidence") or [], ensure_ascii=False), "held": int(bool(finding["held"])),
            "model": finding.get("model"), "prompt_version": finding.get("prompt_version"),
            "dismissed_seq": dismissed.get("seq"), "dismissed_by": dismissed.get("by"),
            "dismissed_note": dismissed.get("note")}


def experiment_row(state: RunState, run_id: str, tokens_in: int, tokens_out: int, cost: float,
                   compute: float) -> dict[str, Any]:
    """The ``experiments`` row of a run that is a cell of an experiment."""
    exp = state.experiment or {}
    best = state.best_history[-1][1] if state.best_history else None
    improvement = state.better(best, state.baseline_mean) if best is not None and state.baseline_mean is not None else None
    return {"experiment_id": exp.get("id"), "arm": exp.get("arm"), "seed": exp.get("seed"), "run_id": run_id,
            "finish_reason": state.finish_reason, "direction": state.direction, "baseline": state.baseline_mean,
            "final_best": best, "improvement": improvement, "trials": len(state.agent_trials()),
            "wall_seconds": (state.summary or {}).get("wall_seconds"), "tokens_in": tokens_in,
            "tokens_out": tokens_out, "cost_usd": cost, "compute_seconds": compute}


def _insert(db: sqlite_utils.Database, table: str, rows: Iterable[dict[str, Any]]) -> None:
    """Insert rows (dicts with the same keys) with one executemany."""
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return
    columns = list(first)
    _insert_tuples(db, table, columns, ([row[c] for c in columns] for row in _chain(first, it)))


def _insert_tuples(db: sqlite_utils.Database, table: str, columns: list[str], rows: Iterable[Any],
                   count: int | None = None) -> None:
    """One executemany (sqlite-utils builds a statement per chunk: 3-4x slower on big logs).

    With ``count`` rows to insert into a table holding fewer rows than that (a first export, or a run
    that dwarfs the others), the table's own indexes are dropped first and built again after: one
    sorted build per index costs less than updating every index on every row (about 2x on the events).
    """
    indexes: list[tuple[str, str]] = []
    if count is not None:
        top = db.execute(f"SELECT max(rowid) FROM [{table}]").fetchone()[0] or 0
        if count > top:
            indexes = [(name, sql) for name, sql in db.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                [table]).fetchall()]
            for name, _ in indexes:
                db.execute(f"DROP INDEX [{name}]")
    sql = (f"INSERT INTO [{table}] ({', '.join(f'[{c}]' for c in columns)}) "
           f"VALUES ({', '.join('?' for _ in columns)})")
    db.conn.executemany(sql, rows)
    for _, create in indexes:
        db.execute(create)


def _chain(first: dict[str, Any], rest: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    yield first
    yield from rest


def export_runs(run_dirs: list[Path], out: Path) -> list[ExportResult]:
    """Export each run into the SQLite file ``out`` (created if needed)."""
    out = Path(out)
    if out.is_dir():
        raise ExportError(f"{out}: is a directory, not a database file")
    if not out.parent.is_dir():
        raise ExportError(f"{out}: directory {out.parent} does not exist")
    try:
        db = sqlite_utils.Database(out)
        db.execute("PRAGMA foreign_keys = ON")
        # no fsync per commit: an export can always be redone from the run logs, so the durability of a
        # half-written export is not needed
        db.execute("PRAGMA synchronous = OFF")
        _ensure_schema(db)
    except sqlite3.DatabaseError as exc:  # not a database, unreadable, cannot be created
        raise ExportError(f"{out}: cannot use it as an SQLite database: {exc}") from None
    try:
        results = [export_run(db, Path(run_dir)) for run_dir in run_dirs]
        if any(not r.skipped for r in results):
            for name in ("blackboard", "turns"):
                db[name].rebuild_fts()  # type: ignore[union-attr]
    except sqlite3.OperationalError as exc:  # read-only, locked by another writer, disk full
        raise ExportError(f"{out}: cannot write the export: {exc}") from None
    finally:
        db.close()
    return results
