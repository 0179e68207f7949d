"""The one decoder of run-log lines: every reader of ``events.jsonl`` turns a line into a :class:`LogEvent` here.

Who decodes through it: the store's scan and the loop's tail (rrma/log/tail.py), an append's returned
events, the views' reader and its turn index (rrma/log/reader.py, rrma/log/turns.py), the chain check
(rrma/log/chain.py), the export and the run-control scan. So the fold (:meth:`RunState.apply
<rrma.log.state.RunState.apply>`) sees one kind of event whoever read it: a :class:`LogEvent` whose
``data`` is an instance of its kind's pydantic payload model (rrma/log/events.py ``DATA_TYPES``).

Why it is not pydantic alone: validating every line through pydantic costs about 6 µs a payload plus
the envelope, and a run of a million events must open as fast as one of ten (STYLE point 4). So
each kind's checker is compiled once, at import, from its payload model's fields: the JSON types a
field may hold, its literals, the models inside its lists, its default, written out as one straight
Python function per model (a loop over a table cost 10% of a cold fold more). A line is parsed with
orjson and its payload checked by that function (about 1 µs); when it fits, the payload model is built
directly from the parsed values (no validation run again). Anything the table does not settle (a
field of another type, a string where a number belongs, an unknown field inside a nested model's
list) goes to pydantic itself, which coerces it as the core would or says what is wrong.

Invariants (tests/log/test_codec_types.py holds them against pydantic, field by field, for every kind):

* the fast path never accepts a payload pydantic refuses, and reads what it accepts as pydantic
  does: the same values, an ``int`` in a ``float`` field turned into its float, absent fields
  at their model's default (a factory called anew each time), unknown fields kept as extras;
* the envelope is stricter than pydantic's lax mode: ``seq`` must be a JSON integer and ``ts``,
  ``actor``, ``prev``, ``hash`` strings (a line rrma did not write as it writes them is refused,
  never coerced); an unknown envelope field, a missing one, a newer schema version are refused;
* decoding never changes the object it is given (the chain check hashes the same dict);
* every refusal is an :class:`InvalidEvent` (a :class:`~rrma.log.events.LogFormatError`) saying why
  in one line: ``invalid trial.finished event (data.score: Input should be a valid number)``.

One limit: orjson reads an integer beyond 64 bits as a float (a ``dict[str, Any]`` value of
2**70 then reads as 1.18e21); the chain check parses with :mod:`json` for its hashes, so
verification is exact, and rrma itself never writes such a number.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

import orjson
from pydantic import BaseModel, ValidationError

from rrma.log.events import DATA_TYPES, EVENT_TYPES, SCHEMA_VERSION, LogFormatError


class InvalidEvent(LogFormatError):
    """A line that is not a valid event of its kind: not JSON, a field of the wrong type, a missing field."""


@dataclass(slots=True, eq=False)
class LogEvent:
    """One event of a run log as every reader hands it to the fold: the envelope and the typed payload.

    ``offset`` is the byte of the log the line starts at (-1 where the reader does not say).
    """

    v: int
    seq: int
    ts: str
    kind: str
    actor: str
    data: Any  # its kind's payload model (rrma/log/events.py DATA_TYPES)
    prev: str
    hash: str
    offset: int = -1


@dataclass
class Torn:
    """A line a reader could not decode: where it starts, and why (the :class:`InvalidEvent`'s words)."""

    offset: int
    error: str


# ----------------------------------------------------------------------------- the payload tables

_ABSENT = object()
_JSON_TYPES: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (float, int), bool: (bool,),
                                            NoneType: (NoneType,)}
Convert = Callable[[Any], Any]  # the value as pydantic reads it, or _MISFIT (pydantic must look)
_MISFIT: Any = object()


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _simple(annotation: Any) -> tuple[tuple[type, ...], bool] | None:
    """(the JSON types a field may hold, whether an int is read as a float) when its type alone decides it
    (``float | None``, ``dict[str, Any]``); None when its values must be looked into."""
    if annotation is Any:
        return None
    if annotation in _JSON_TYPES:
        return _JSON_TYPES[annotation], annotation is float
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Union or origin is UnionType:
        parts = [_simple(a) for a in args]
        if any(p is None for p in parts):
            return None
        return tuple(t for p in parts if p for t in p[0]), any(p[1] for p in parts if p)
    if (origin is dict and (len(args) < 2 or args[1] is Any)) or (origin is list and (not args or args[0] is Any)):
        return (origin,), False
    return None


def _converter(annotation: Any) -> Convert | None:
    """A reading of one parsed JSON value as ``annotation`` (see :data:`Convert`); None: any value, as it is."""
    if annotation is Any:
        return None
    simple = _simple(annotation)
    if simple is not None:
        types, to_float = simple
        if to_float:
            return lambda v: _float(v) if type(v) is int else (v if type(v) in types else _MISFIT)
        return lambda v: v if type(v) in types else _MISFIT
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        allowed = frozenset(a for a in args if type(a) is str)
        return lambda v: v if type(v) is str and v in allowed else _MISFIT
    if origin is Union or origin is UnionType:
        members = [a for a in args if a is not NoneType]
        if len(members) != 1 or len(args) != 2:
            return lambda v: _MISFIT  # no such field today: pydantic decides
        inner = _converter(members[0])
        if inner is None:
            return None
        return lambda v: None if v is None else inner(v)
    if origin is list and args:
        item = _converter(args[0])
        assert item is not None  # list[Any] is simple
        return lambda v: _each(v, item) if type(v) is list else _MISFIT
    if origin is dict and len(args) == 2:
        value = _converter(args[1])
        assert value is not None  # dict[str, Any] is simple
        return lambda v: _each_value(v, value) if type(v) is dict else _MISFIT
    if _is_model(annotation):
        codec = _PayloadCodec(annotation)
        return lambda v: codec.build_or_misfit(v)
    return lambda v: _MISFIT  # a type the table does not know: pydantic decides


def _float(v: int) -> Any:
    """An int in a float field, as pydantic reads it (one too large for a float: pydantic says why)."""
    try:
        return float(v)
    except OverflowError:
        return _MISFIT


def _each(items: list[Any], read: Convert) -> Any:
    """``items`` read one by one: the same list when nothing changed, a new one when a value did."""
    out: list[Any] | None = None
    for i, v in enumerate(items):
        r = read(v)
        if r is not v:
            if r is _MISFIT:
                return _MISFIT
            if out is None:
                out = items[:i]
        if out is not None:
            out.append(r)
    return items if out is None else out


def _each_value(mapping: dict[Any, Any], read: Convert) -> Any:
    out: dict[Any, Any] | None = None
    for i, (k, v) in enumerate(mapping.items()):
        r = read(v)
        if r is not v:
            if r is _MISFIT:
                return _MISFIT
            if out is None:
                out = dict(list(mapping.items())[:i])
        if out is not None:
            out[k] = r
    return mapping if out is None else out


_new = object.__new__
_set = object.__setattr__


class _PayloadCodec:
    """One payload model's table: its required fields, each field's check, its defaults; and the model built
    from values that passed (as ``model_construct`` would, without its per-call overhead)."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        fields = model.model_fields
        self.names = frozenset(fields)
        self.required = tuple(name for name, info in fields.items() if info.is_required())
        self.simple: list[tuple[str, tuple[type, ...], bool]] = []  # (name, JSON types, int read as float)
        self.nested: list[tuple[str, Convert]] = []
        self.defaults: dict[str, Any] = {}  # name -> its constant default
        self.factories: dict[str, Callable[[], Any]] = {}  # name -> what makes its default (a new list...)
        for name, info in fields.items():
            simple = _simple(info.annotation)
            if simple is not None:
                self.simple.append((name, *simple))
            elif (convert := _converter(info.annotation)) is not None:
                self.nested.append((name, convert))
            if info.is_required():
                continue
            if info.default_factory is not None:
                self.factories[name] = info.default_factory  # type: ignore[assignment]
            else:
                self.defaults[name] = info.get_default()
        # read: ``d``'s values as pydantic reads them (``d`` itself when nothing changes); None: pydantic must look.
        self.read: Callable[[Any], dict[str, Any] | None] = self._compile(build=False)
        # build_or_misfit: the payload model of ``d`` when the table settles it, else _MISFIT.
        self.build_or_misfit: Convert = self._compile(build=True)

    def _compile(self, build: bool) -> Callable[[Any], Any]:
        """This table as one straight Python function, written once at import (a loop over the fields costs
        about twice as much per payload as their checks unrolled): ``read`` when ``build`` is false, else the
        payload model built from what was read, or ``_MISFIT``.

        What it does, field by field: a required field absent is a misfit; a field present must hold one of
        its JSON types (an int in a float field becomes its float) or pass its converter; a field absent
        is noted, so that a payload holding exactly the model's fields (the usual case) is built without
        sorting fields from extras."""
        refuse = "return MISFIT" if build else "return None"
        env: dict[str, Any] = {"ABSENT": _ABSENT, "MISFIT": _MISFIT, "to_float": _float, "dict": dict,
                               "type": type, "int": int, "build": self.build, "new": _new, "set_": _set,
                               "model": self.model, "names": self.names, "n_names": len(self.names),
                               "set": set}
        code = ["def compiled(d):", "    if type(d) is not dict:", f"        {refuse}"]
        for name in self.required:
            code += [f"    if {name!r} not in d:", f"        {refuse}"]
        code += ["    out = d", "    complete = True"]
        for i, (name, types, to_float) in enumerate(self.simple):
            env[f"T{i}"] = types
            code += [f"    v = d.get({name!r}, ABSENT)", "    if v is ABSENT:", "        complete = False",
                     "    else:", "        t = type(v)", f"        if t not in T{i}:", f"            {refuse}"]
            if to_float:
                code += ["        if t is int:", "            v = to_float(v)", "            if v is MISFIT:",
                         f"                {refuse}", "            if out is d:", "                out = dict(d)",
                         f"            out[{name!r}] = v"]
        for i, (name, convert) in enumerate(self.nested):
            env[f"C{i}"] = convert
            code += [f"    v = d.get({name!r}, ABSENT)", "    if v is ABSENT:", "        complete = False",
                     "    else:", f"        r = C{i}(v)", "        if r is not v:", "            if r is MISFIT:",
                     f"                {refuse}", "            if out is d:", "                out = dict(d)",
                     f"            out[{name!r}] = r"]
        if not build:
            code.append("    return out")
        else:
            # Every field present and nothing else: the values are the fields (the usual case); else build sorts
            # fields from extras and fills defaults. A field neither simple nor nested (Any) is not seen above.
            exact = "complete and len(out) == n_names" if len(self.simple) + len(self.nested) == len(self.names) \
                else "False"
            code += [f"    if {exact}:", "        m = new(model)", "        set_(m, '__dict__', out)",
                     "        set_(m, '__pydantic_fields_set__', set(names))",
                     "        set_(m, '__pydantic_extra__', {})", "        set_(m, '__pydantic_private__', None)",
                     "        return m", "    return build(out)"]
        exec(compile("\n".join(code), f"<codec {self.model.__name__}>", "exec"), env)
        return env["compiled"]  # type: ignore[no-any-return]

    def build(self, values: dict[str, Any]) -> BaseModel:
        """The payload model of ``values`` (read by :meth:`read`): absent fields at their defaults, the rest extra."""
        names = self.names
        if values.keys() == names:
            fields, extra, given = values, {}, set(names)
        else:
            fields = {k: v for k, v in values.items() if k in names}
            extra = {k: v for k, v in values.items() if k not in names}
            given = set(fields) | set(extra)
            for name in names - fields.keys():
                factory = self.factories.get(name)
                fields[name] = factory() if factory is not None else self.defaults[name]
        m = _new(self.model)
        _set(m, "__dict__", fields)
        _set(m, "__pydantic_fields_set__", given)
        _set(m, "__pydantic_extra__", extra)
        _set(m, "__pydantic_private__", None)
        return m


_PAYLOADS: dict[str, _PayloadCodec] = {kind: _PayloadCodec(model) for kind, model in DATA_TYPES.items()}
_ENVELOPE_STRINGS = ("ts", "actor", "prev", "hash")


def fast_payload(kind: str, data: Any) -> dict[str, Any] | None:
    """What the fast path reads from a ``kind`` payload (None: it leaves the payload to pydantic). For tests."""
    return _PAYLOADS[kind].read(data)


# ----------------------------------------------------------------------------- decoding


def loads(line: bytes | str) -> Any:
    """A line parsed as JSON (orjson; what only :mod:`json` reads, such as NaN, as :mod:`json` reads it)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            return json.loads(line)
        except (ValueError, RecursionError) as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            raise InvalidEvent(f"not JSON ({why})") from None


def decode_line(line: bytes | str, offset: int = -1) -> LogEvent:
    """One log line (without its newline) as a :class:`LogEvent`, or :class:`InvalidEvent` saying why not."""
    return decode(loads(line), offset)


def _fast_codec(raw: Any) -> _PayloadCodec | None:
    """The payload table of ``raw``'s kind when its envelope is one the fast path takes as it is (None: not)."""
    if type(raw) is not dict or len(raw) != 8 - ("v" not in raw):
        return None
    try:
        kind, seq, ts, actor, prev, digest = raw["kind"], raw["seq"], raw["ts"], raw["actor"], raw["prev"], raw["hash"]
    except KeyError:
        return None
    if "data" not in raw or type(kind) is not str or type(seq) is not int or type(ts) is not str:
        return None
    if type(actor) is not str or type(prev) is not str or type(digest) is not str:
        return None
    v = raw.get("v", SCHEMA_VERSION)
    if type(v) is not int or not 1 <= v <= SCHEMA_VERSION:
        return None
    return _PAYLOADS.get(kind)


def decode(raw: Any, offset: int = -1) -> LogEvent:
    """A parsed log line as a :class:`LogEvent` (``raw`` is not changed), or :class:`InvalidEvent`."""
    codec = _fast_codec(raw)
    if codec is not None:
        data = codec.build_or_misfit(raw["data"])
        if data is not _MISFIT:
            return LogEvent(raw.get("v", SCHEMA_VERSION), raw["seq"], raw["ts"], raw["kind"], raw["actor"], data,
                            raw["prev"], raw["hash"], offset)
    return _decode_slowly(raw, offset)


def _decode_slowly(raw: Any, offset: int) -> LogEvent:
    """What the fast path did not settle, through pydantic, with the reason of a refusal in one line."""
    if type(raw) is not dict:
        raise InvalidEvent("not a JSON object")
    version = raw.get("v")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise InvalidEvent(f"event schema version {version} is newer than this rrma understands "
                           f"({SCHEMA_VERSION}); upgrade rrma")
    kind = raw.get("kind")
    if type(kind) is not str or kind not in DATA_TYPES:
        raise InvalidEvent(f"unknown event kind {kind!r}")
    if "seq" in raw and type(raw["seq"]) is not int:
        raise InvalidEvent(f"invalid {kind} event (seq: not an integer)")
    for name in _ENVELOPE_STRINGS:
        if name in raw and type(raw[name]) is not str:
            raise InvalidEvent(f"invalid {kind} event ({name}: not a string)")
    try:
        event = EVENT_TYPES[kind].model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(part) for part in first["loc"]) or "data"
        raise InvalidEvent(f"invalid {kind} event ({loc}: {first['msg']})") from None
    data = event.data  # type: ignore[attr-defined]  # every envelope model of EVENT_TYPES has its kind's data
    return LogEvent(event.v, event.seq, event.ts, kind, event.actor, data, event.prev, event.hash, offset)


def checked(raw: Any) -> dict[str, Any]:
    """A parsed line whose payload reads as pydantic reads it, as a dict (for readers that keep lines as JSON:
    the trace's turn index): ``raw`` itself when the fast path takes it as it is, else a copy whose ``data``
    is the payload's JSON reading. :class:`InvalidEvent` when it is not a valid event."""
    codec = _fast_codec(raw)
    if codec is not None and codec.read(raw["data"]) is raw["data"]:
        return raw  # type: ignore[no-any-return]
    event = decode(raw)
    return {**raw, "data": event.data.model_dump(mode="json")}
