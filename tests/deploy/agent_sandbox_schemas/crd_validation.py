"""Validate Agent Sandbox objects against the vendored CRD schemas, strictly.

The API server prunes (or, with strict field validation, rejects) fields a CRD's schema
does not name; here every object schema without ``x-kubernetes-preserve-unknown-fields``
is closed, so a misspelt field fails the way ``kubernetes-validate --strict`` fails one in
a built-in kind.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema

HERE = Path(__file__).resolve().parent


def _closed(node: object) -> object:
    if isinstance(node, list):
        return [_closed(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def _validator(kind: str) -> tuple[str, jsonschema.Draft7Validator]:
    vendored = json.loads((HERE / f"{kind}.json").read_text())
    api_version = f"{vendored['group']}/{vendored['version']}"
    return api_version, jsonschema.Draft7Validator(_closed(vendored["schema"]))


def kinds() -> list[str]:
    """The kinds whose schemas are vendored."""
    return sorted(p.stem for p in HERE.glob("*.json"))


def validate(doc: dict) -> None:
    """Raise ``jsonschema.ValidationError`` (or ``KeyError`` for an unknown kind) unless ``doc``
    is a valid object of its kind."""
    api_version, validator = _validator(doc["kind"])
    if doc.get("apiVersion") != api_version:
        raise jsonschema.ValidationError(f"apiVersion must be {api_version}")
    validator.validate(doc)
