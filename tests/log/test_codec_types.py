"""The codec's fast path (rrma/log/codec.py) against pydantic, for every event kind: the contract of the one decoder.

Every reader decodes through the codec, which skips pydantic for a payload whose JSON types already
fit its model and builds the payload model from the parsed values; so the fast path must never pass a
payload pydantic would refuse (it would reach the fold and the widgets with a wrong type) or one
pydantic would read differently. Here every kind's payload is built valid from its model, then each
field (and each field inside a list item, a mapping value or a nested model) is given values of every
other JSON type, and:

* a payload the fast path passes is one pydantic accepts, and the decoded payload is pydantic's: the
  same model, the same values of the same types (an int in a float field read as its float);
* a payload pydantic refuses is refused by the codec too (an ``InvalidEvent`` named
  ``invalid KIND event (data.FIELD: ...)``), by the views' line parser (``parse_lines``: an unreadable
  line, never folded) and by the dict form the turn index reads (``checked``);
* a payload pydantic accepts is decoded, as pydantic reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from rrma.log.codec import InvalidEvent, checked, decode_line, fast_payload
from rrma.log.events import DATA_TYPES, canonical
from rrma.log.reader import parse_lines

WRONG: list[Any] = ["text", 7, 2.5, True, None, [1], ["a"], {"k": 1}, {"k": "v"}, [{"path": 3}]]  # one of each JSON type


def sample(annotation: Any) -> Any:
    """A valid JSON value for ``annotation`` (the first arm of a union that is not None)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is Any:
        return {"any": 1}
    if annotation in (str, int, float, bool):
        return {str: "s", int: 3, float: 1.5, bool: True}[annotation]
    if origin is Literal:
        return args[0]
    if origin in (Union, UnionType):
        return sample(next(a for a in args if a is not NoneType))
    if origin is list:
        return [sample(args[0] if args else Any)]
    if origin is dict:
        return {"k": sample(args[1] if len(args) == 2 else Any)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {name: sample(info.annotation) for name, info in annotation.model_fields.items()}
    raise AssertionError(f"no sample for {annotation!r}")


def mutations(annotation: Any, value: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, wrong value) for the value at ``path`` (not the payload itself) and everything inside it."""
    for wrong in WRONG if path else ():
        yield path, wrong
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, UnionType):
        annotation = next(a for a in args if a is not NoneType)
        origin, args = get_origin(annotation), get_args(annotation)
    if origin is list and args:
        yield from mutations(args[0], value[0], (*path, 0))
    elif origin is dict and len(args) == 2:
        yield from mutations(args[1], value["k"], (*path, "k"))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            yield from mutations(info.annotation, value[name], (*path, name))
        for name in annotation.model_fields:  # a required field missing (refused), an optional one (its default)
            yield (*path, name), _DELETE
        yield (*path, "unknown_field"), "kept as an extra"  # a field the model does not name


_DELETE = object()


def with_value(payload: dict[str, Any], path: tuple[Any, ...], wrong: Any) -> dict[str, Any]:
    out: Any = json.loads(json.dumps(payload))
    node = out
    for part in path[:-1]:
        node = node[part]
    if wrong is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = wrong
    return out  # type: ignore[no-any-return]


def cases(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(id, malformed payload) of ``kind``: each field and each value inside one given every other JSON type."""
    model = DATA_TYPES[kind]
    valid = sample(model)
    for path, wrong in mutations(model, valid, ()):
        label = "deleted" if wrong is _DELETE else json.dumps(wrong)
        yield f"{'.'.join(map(str, path))}={label}", with_value(valid, path, wrong)


def line_of(kind: str, data: Any) -> bytes:
    raw = {"v": 1, "seq": 7, "ts": "2026-01-05T09:00:00.000000Z", "kind": kind, "actor": "harness", "data": data,
           "prev": "0" * 64, "hash": "1" * 64}
    return (canonical(raw) + "\n").encode()


def test_every_kind_has_a_valid_sample_the_check_passes() -> None:
    for kind, model in DATA_TYPES.items():
        valid = sample(model)
        assert fast_payload(kind, valid) is not None, kind
        assert codec_disagrees(kind, valid) is None, kind


def test_the_cases_reach_nested_values() -> None:
    assert any(i.startswith("edits.0.path=") for i, _ in cases("trial.proposed"))  # a model inside a list
    assert any(i.startswith("extra.k=") for i, _ in cases("train.step"))  # a mapping's value
    assert any(i.startswith("evidence.0.seq=") for i, _ in cases("audit.finding"))
    assert any(i == "trial_id=deleted" for i, _ in cases("trial.finished"))  # a required field missing
    assert any(i == "feedback=deleted" for i, _ in cases("trial.finished"))  # an optional field missing
    assert any(i == "edits.0.unknown_field=\"kept as an extra\"" for i, _ in cases("trial.proposed"))
    assert sum(1 for kind in DATA_TYPES for _ in cases(kind)) > 1500


def same(a: Any, b: Any) -> bool:
    """``a`` and ``b`` are the same JSON value of the same Python types (``True`` is not ``1``, ``1`` not ``1.0``)."""
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(map(same, a, b))
    return type(a) is type(b) and a == b


def dumped(payload: BaseModel) -> dict[str, Any]:
    """A payload model's fields and extras, as Python values (nested models as dicts, each named by its class)."""
    def plain(value: Any) -> Any:
        if isinstance(value, BaseModel):
            return {"__model__": type(value).__name__, "__set__": sorted(value.model_fields_set),
                    **{k: plain(v) for k, v in value}, **{
                        f"extra:{k}": plain(v) for k, v in (value.model_extra or {}).items()}}
        if type(value) is list:
            return [plain(v) for v in value]
        if type(value) is dict:
            return {k: plain(v) for k, v in value.items()}
        return value
    return plain(payload)  # type: ignore[no-any-return]


def codec_disagrees(kind: str, payload: Any) -> str | None:
    """Why the codec reads ``payload`` otherwise than pydantic (None when it agrees)."""
    model = DATA_TYPES[kind]
    try:
        read: BaseModel | None = model.model_validate(payload)
    except ValidationError:
        read = None
    line = line_of(kind, payload)
    if fast_payload(kind, payload) is not None and read is None:
        return "the fast path passed a payload pydantic refuses"
    try:
        event = decode_line(line.strip(), 12)
    except InvalidEvent as exc:
        if read is not None:
            return f"refused though pydantic reads it: {exc}"
        if not str(exc).startswith(f"invalid {kind} event (data"):
            return f"refused for another reason: {exc}"
    else:
        if read is None:
            return "decoded a payload pydantic refuses"
        if type(event.data) is not model or not same(dumped(event.data), dumped(read)):
            return f"decoded otherwise than pydantic: {dumped(event.data)} != {dumped(read)}"
        if (event.offset, event.seq, event.kind) != (12, 7, kind):
            return "the envelope is not the line's"
    parsed = parse_lines(line, 0, stub_turns=False)
    if read is None:  # refused by the core: an unreadable line, never folded
        if parsed.items or len(parsed.torn) != 1 or not parsed.torn[0].error.startswith(f"invalid {kind} event (data"):
            return f"folded, or refused for another reason: {[t.error for t in parsed.torn]}"
        try:
            checked(json.loads(line))
        except InvalidEvent:
            pass
        else:
            return "checked (the turn index's reader) passed it"
    elif parsed.torn or not parsed.items:
        return f"the line parser refused it though pydantic reads it: {[t.error for t in parsed.torn]}"
    else:  # the dict form: each value it gives is pydantic's JSON reading (absent ones are at their defaults)
        form, want = checked(json.loads(line))["data"], {k: to_jsonable_python(v) for k, v in read}
        if not all(k in want and same(v, want[k]) for k, v in form.items()):
            return f"checked (the turn index's reader) reads it otherwise: {form} != {want}"
    return None


@pytest.mark.parametrize("kind", sorted(DATA_TYPES))
def test_the_fast_check_never_passes_what_pydantic_refuses_or_reads_otherwise(kind: str) -> None:
    disagreements = {case: why for case, payload in cases(kind) if (why := codec_disagrees(kind, payload))}
    assert disagreements == {}


@pytest.mark.parametrize("data", [None, [], "text", 3])
def test_a_payload_that_is_not_an_object_is_refused_for_every_kind(data: Any) -> None:
    for kind in DATA_TYPES:
        parsed = parse_lines(line_of(kind, data), 0, stub_turns=False)
        assert parsed.items == [] and parsed.torn[0].error.startswith(f"invalid {kind} event (data"), kind
