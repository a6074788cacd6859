"""The server's tool catalog, read over ``/mcp``, and the same tools as typed Python methods.

Every adapter shows the model the server's own tools, so none keeps a list of its own:
:func:`fetch_tool_specs` reads the catalog (name, description, JSON Schema) from a live
server. Trainers that discover tools on a class (TRL's ``environment_factory``) get one
generated method per tool from :func:`bind_tools`, typed from the schema and with a
Google-style docstring, which ``transformers.utils.get_json_schema`` turns back into the
schema the model sees.
"""

from __future__ import annotations

import keyword
import re
import threading
from typing import Any

import httpx

from analyst_env.client.endpoints import split_urls

_JSON_TO_PY = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
}
_RESERVED = {"reset", "get_reward"}
"""Names a bound class keeps for itself (TRL calls them on every environment), never tools."""
_bind_lock = threading.Lock()


def fetch_tool_specs(base_url: str, headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """The server's tool catalog (``name``, ``description``, ``input_schema``) over ``/mcp``
    ``tools/list`` (from the first replica that answers, when ``base_url`` names several).

    Raises:
        RuntimeError: No server answered with a tool list.
    """
    problems = []
    for url in split_urls(base_url):
        try:
            reply = httpx.post(
                f"{url}/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers=headers,
                timeout=30,
            )
            reply.raise_for_status()
            tools = reply.json()["result"]["tools"]
            break
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            problems.append(f"{url}/mcp: {exc}")
    else:
        raise RuntimeError(f"could not read the tool catalog from {'; '.join(problems)}")
    return [
        {
            "name": t["name"],
            "description": t.get("description") or "",
            "input_schema": t.get("inputSchema") or t.get("input_schema") or {},
        }
        for t in tools
    ]


def bind_tools(specs: list[dict[str, Any]], cls: type) -> list[str]:
    """Set one typed method per tool on ``cls`` (TRL discovers tools on the class).

    Each method has the tool's parameters with Python types from the JSON Schema
    and a Google-style docstring (summary, ``Args:``, ``Returns:``), which
    ``transformers.utils.get_json_schema`` turns back into the tool schema the
    model sees. Tools whose names are not Python identifiers are skipped.

    Returns:
        The names of the bound tools.
    """
    bound = []
    with _bind_lock:
        for spec in specs:
            name = spec["name"]
            if (
                not name.isidentifier()
                or keyword.iskeyword(name)
                or name.startswith("_")
                or name in _RESERVED
            ):
                continue
            schema = spec.get("input_schema") or {}
            setattr(cls, name, _make_method(cls, name, spec.get("description", ""), schema))
            bound.append(name)
    return bound


def _make_method(cls: type, name: str, description: str, schema: dict[str, Any]):
    props: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [p for p in props if p.isidentifier() and not keyword.iskeyword(p)]
    params.sort(key=lambda p: p not in required)  # required ones first
    signature = ["self"]
    for p in params:
        annotation = _JSON_TO_PY.get(props[p].get("type", "string"), "str")
        if p in required:
            signature.append(f"{p}: {annotation}")
        else:
            signature.append(f"{p}: {annotation} = {props[p].get('default')!r}")
    doc = _docstring(description, {p: props[p] for p in params})
    source = (
        f"def {name}({', '.join(signature)}) -> str:\n"
        f"    {doc!r}\n"
        f"    return self._call({name!r}, {{{', '.join(f'{p!r}: {p}' for p in params)}}})\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<analyst_env tool {name}>", "exec"), namespace)  # noqa: S102 (generated from a schema)
    method = namespace[name]
    method.__module__ = cls.__module__
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method


_SECTION = re.compile(r"^\s*(Args|Arguments|Returns|Raises|Example|Examples):\s*$", re.M)


def _docstring(description: str, props: dict[str, Any]) -> str:
    """A Google-style docstring: the description's summary, Args (one per parameter) and Returns."""
    sections = _split_sections(description)
    documented = _arg_lines(sections.get("Args", "") or sections.get("Arguments", ""))
    lines = [sections[""].strip() or "Call this tool."]
    if props:
        lines += ["", "Args:"]
        for p, prop in props.items():
            text = documented.get(p) or prop.get("description") or p.replace("_", " ")
            lines.append(f"    {p}: {' '.join(text.split())}")
    returns = " ".join(sections.get("Returns", "").split()) or "The tool's output as text."
    lines += ["", "Returns:", f"    {returns}"]
    return "\n".join(lines)


def _split_sections(text: str) -> dict[str, str]:
    parts = _SECTION.split(text)
    sections = {"": parts[0]}
    for title, body in zip(parts[1::2], parts[2::2]):
        sections[title] = body
    return sections


def _arg_lines(body: str) -> dict[str, str]:
    args: dict[str, str] = {}
    current = None
    for line in body.splitlines():
        m = re.match(r"^\s*(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
        if m:
            current = m.group(1)
            args[current] = m.group(2)
        elif current and line.strip():
            args[current] += " " + line.strip()
    return args
