"""The learner's request file, validated against the JSON Schema emitted from src/training/learner-request.ts
(``learner-request.schema.json``, beside this package); every field is required, the defaults live in TypeScript."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "learner-request.schema.json"
_TYPES = {"string": str, "boolean": bool, "object": dict, "null": type(None)}


def snake(name: str) -> str:
    """``microBatch`` -> ``micro_batch`` (the request's keys are TypeScript's camelCase)."""
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def _type_ok(value: Any, t: str) -> bool:
    if t in ("number", "integer"):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return ok and (t == "number" or float(value).is_integer())
    return isinstance(value, _TYPES[t])


def _check(value: Any, s: dict[str, Any], where: str) -> None:
    """The subset of JSON Schema that zod emits for the request: type, anyOf, enum, const, bounds, objects."""
    if "anyOf" in s:
        errors = []
        for alt in s["anyOf"]:
            try:
                return _check(value, alt, where)
            except ValueError as err:
                errors.append(str(err))
        raise ValueError(errors[0])
    if "type" in s and not _type_ok(value, s["type"]):
        raise ValueError(f"{where}: expected {s['type']}, got {json.dumps(value)}")
    if ("enum" in s and value not in s["enum"]) or ("const" in s and value != s["const"]):
        raise ValueError(f"{where}: {json.dumps(value)} is not one of {s.get('enum', [s.get('const')])}")
    for key, bad in (("minimum", lambda v, b: v < b), ("exclusiveMinimum", lambda v, b: v <= b), ("maximum", lambda v, b: v > b)):
        if key in s and bad(value, s[key]):
            raise ValueError(f"{where}: {value} breaks {key} {s[key]}")
    if "minLength" in s and len(value) < s["minLength"]:
        raise ValueError(f"{where}: empty")
    if s.get("type") == "object":
        props, extra = s.get("properties", {}), s.get("additionalProperties")
        if isinstance(extra, dict):  # a record: any key, every value of one schema
            props = {**{k: extra for k in value}, **props}
        unknown = sorted(set(value) - set(props))
        missing = [k for k in s.get("required", []) if k not in value]
        if unknown or missing:
            raise ValueError(f"{where}: unknown fields {unknown}, missing fields {missing}")
        for k, v in value.items():
            _check(v, props[k], f"{where}.{k}")


def validate(req: Any, where: str = "request") -> dict[str, Any]:
    """``req`` when it matches the schema, else ValueError naming the first bad field."""
    _check(req, schema(), where)
    return req


def read_request(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as fh:
        try:
            req = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not JSON: {err}") from err
    return validate(req, path)


def step_config(req: dict[str, Any], compute_dtype: Any):
    """The StepConfig of a request: its ``train`` fields, snake_cased, plus the mode, the optimizer state
    and the compute dtype (from ``runtime.dtype``, resolved against the device by the caller)."""
    from .train import StepConfig

    train = {snake(k): v for k, v in req["train"].items()}
    return StepConfig(mode=req["mode"], optimizer_state=req["paths"]["optimizerState"], compute_dtype=compute_dtype, **train)
