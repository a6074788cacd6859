"""What each field of a recipe accepts: the grammars, the length caps and their checks.

Recipes come from users (a form on ``/web``, ``POST /envs``) and end up in shell
commands, config files and index URLs of a build, so every field has a tight grammar:
one entry installs one thing its hash can name, and nothing in a value can be expanded
by a shell or a config parser. Each check raises ``ValueError`` with the offending
value (cut to 80 characters), which pydantic reports as a field error.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$")
# npm: a name, then an exact version, a ^/~ range of one version, or a dist-tag. No
# '|', '<', '>', '*', spaces or URLs: one entry installs one thing the hash can name.
NPM_RE = re.compile(
    r"^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,100}(@[~^]?[A-Za-z0-9][A-Za-z0-9.+-]{0,63})?$"
)
# Index URLs: scheme, optional user[:password]@, host, optional port, a plain path. No
# query, fragment, '$', backticks, quotes or spaces: nothing a shell or config file could expand.
URL_RE = re.compile(
    r"^https?://([A-Za-z0-9._~%-]+(:[A-Za-z0-9._~%-]*)?@)?[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(:[0-9]{1,5})?"
    r"(/[A-Za-z0-9._~%/+-]*)?$"
)
APT_SUITE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$")
APT_OPTIONS_RE = re.compile(r"^\[([a-z-]+=[A-Za-z0-9._/,:-]+)( [a-z-]+=[A-Za-z0-9._/,:-]+)*\]$")
#: Entries per package list and characters per entry (a 10,000-package list is a DoS, not a recipe).
MAX_ENTRIES = 200
MAX_ENTRY_CHARS = 200
MAX_URL_CHARS = 2048
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
VERSION_OPS = "<>=!~"


class RecipeError(ValueError):
    """A recipe that cannot be read or is invalid; the message says which field and why."""


def split_list(value: Any) -> list[str]:
    """Split a user-typed package list on spaces, commas and newlines.

    Commas inside brackets (``pkg[a,b]``) and before a version operator
    (``pandas>=2,<3``) belong to the entry; an entry that starts with a version operator
    (``pandas >=2``) is joined to the one before it. A list is taken entry by entry,
    each entry stripped; blank entries are dropped.
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        out = []
        for item in value:
            if not isinstance(item, str):
                raise RecipeError(f"list entries must be strings, got {item!r}")
            if item.strip():
                out.append(item.strip())
        return out
    if not isinstance(value, str):
        raise RecipeError(f"expected a string or a list of strings, got {value!r}")
    tokens: list[str] = []
    current = ""
    depth = 0
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if depth == 0 and ch == ",":
            rest = value[i + 1 :].lstrip(" \t")
            if rest[:1] and rest[0] in VERSION_OPS:
                current += ","
            else:
                tokens.append(current)
                current = ""
        elif depth == 0 and ch.isspace():
            tokens.append(current)
            current = ""
        else:
            current += ch
        i += 1
    tokens.append(current)
    merged: list[str] = []
    for token in (t.strip() for t in tokens):
        if not token:
            continue
        if merged and (token[0] in VERSION_OPS or merged[-1][-1] in VERSION_OPS + ","):
            merged[-1] += token
        else:
            merged.append(token)
    return merged


def check_url(value: str | None, field: str) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_URL_CHARS:
        raise ValueError(f"must be at most {MAX_URL_CHARS} characters, got {len(value)}")
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"must be an http:// or https:// URL, got {cut(value)!r}")
    if any(ch.isspace() for ch in value):
        raise ValueError(f"must not contain spaces, got {cut(value)!r}")
    if not URL_RE.match(value):
        raise ValueError(
            "must be a plain http(s) URL (host, optional port and path; no query, '$', "
            "backticks or quotes), "
            f"got {cut(value)!r}"
        )
    return value


def each_matching(entries: list[str], pattern: re.Pattern[str], what: str) -> list[str]:
    """``entries`` unchanged once each matches ``pattern``; else ValueError naming the first
    that does not (``'entry' is not <what>``)."""
    for entry in entries:
        if not pattern.match(entry):
            raise ValueError(f"{entry!r} is not {what}")
    return entries


def cut(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


def pip_entry(entry: str, field: str) -> str:
    if entry.startswith("-"):
        raise ValueError(
            f"{entry!r} is an installer option; only package requirements are "
            "accepted (use the index URL fields for registries)"
        )
    try:
        req = Requirement(entry)
    except InvalidRequirement as exc:
        raise ValueError(
            f"{entry!r} is not a valid requirement ({str(exc).splitlines()[0]})"
        ) from None
    if req.url and not req.url.startswith(("http://", "https://")):
        raise ValueError(f"{entry!r} may only reference an http:// or https:// URL")
    if req.url and not URL_RE.match(req.url):
        raise ValueError(
            f"{cut(entry)!r} must reference a plain http(s) URL "
            "(no query, '$', backticks or quotes)"
        )
    req.name = canonicalize_name(req.name)
    return str(req)
