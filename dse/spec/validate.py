"""Validate loaded YAML into frozen records, reporting ALL problems at once.

Each problem reads ``file:line:col key.path: what was expected, got what``;
unknown keys get a "did you mean". Validation (this module) is kept apart
from construction (the records' own derived properties).
"""

from __future__ import annotations

import typing

from pydantic import BaseModel, ValidationError

from dse.errors import SpecError, did_you_mean
from dse.spec.yamlio import key_loc, locate


def _fields_at(model: type[BaseModel] | None, loc: tuple) -> list[str] | None:
    """Field names (and aliases) accepted at ``loc`` inside ``model``."""
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            field = next((f for f in model.model_fields.values() if f.alias == part), None)
        if field is None:
            return None
        model = _model_of(field.annotation)
    if model is None:
        return None
    names = []
    for name, f in model.model_fields.items():
        names.append(f.alias or name)
    return names


def _model_of(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        m = _model_of(arg)
        if m is not None:
            return m
    return None


def _clean(msg: str) -> str:
    msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = msg.replace("Input should be ", "expected ")
    msg = msg.replace("Field required", "missing required key")
    return msg


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _data_loc(data, raw: tuple) -> tuple:
    """pydantic's error location without its own steps (``function-after[...]``, union tags).

    A step that is a key of the data at that point is always kept, even if it
    looks like one of pydantic's (a user's key may contain '[').
    """
    out, node = [], data
    for p in raw:
        if isinstance(node, dict) and p in node:
            out.append(p)
            node = node[p]
        elif isinstance(node, list) and isinstance(p, int) and 0 <= p < len(node):
            out.append(p)
            node = node[p]
        elif isinstance(p, str) and ("[" in p or p.startswith("function-")):
            continue
        else:
            out.append(p)
            node = None
    return tuple(out)


def problems_from(err: ValidationError, data, model: type[BaseModel], prefix: tuple = ()) -> list[str]:
    """Turn a pydantic ValidationError into located, human messages."""
    out = []
    for e in err.errors(include_url=False):
        loc = _data_loc(data, e["loc"])
        path = ".".join(str(p) for p in prefix + loc) or "(top level)"
        kind = e["type"]
        if kind == "extra_forbidden":
            file, (line, col) = key_loc(data, loc)
            fields = _fields_at(model, loc[:-1]) or []
            hint = did_you_mean(loc[-1], fields)
            known = f"; known keys: {', '.join(sorted(fields))}" if fields and not hint else ""
            out.append(f"{file}:{line}:{col} {path}: unknown key{hint}{known}")
        elif kind == "missing":
            file, (line, col) = locate(data, loc[:-1])
            out.append(f"{file}:{line}:{col} {path}: missing required key '{loc[-1]}'")
        else:
            file, (line, col) = locate(data, loc)
            msg = _clean(e["msg"])
            # (a check of a whole mapping, e.g. "give exactly one main memory", says what it found itself)
            got = "" if ", got " in msg or isinstance(e.get("input"), dict) else f", got {_show(e.get('input'))}"
            out.append(f"{file}:{line}:{col} {path}: {msg}{got}")
    # one message per location and text, in file order
    seen, uniq = set(), []
    for m in out:
        if m not in seen:
            seen.add(m)
            uniq.append(m)
    return uniq


def validate(model: type[BaseModel], data, prefix: tuple = ()):
    """``model.model_validate(data)`` with every problem located in the YAML."""
    if not isinstance(data, dict):
        file, (line, col) = locate(data, ())
        raise SpecError(f"{file}:{line}:{col}: expected a mapping of keys, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from(err, data, model, prefix)) from None
