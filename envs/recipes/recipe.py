"""The recipe of a sandbox environment: packages, registries, sizing, preloaded modules.

One ``Recipe`` is the single source every backend builds from: the local backend bakes
a venv and a zygote, Docker a Dockerfile, Modal a published image, E2B a template. Its
``content_hash`` covers the build inputs only, so editing the description never rebuilds,
while adding a package always does.

Package lists accept one string with entries separated by spaces, commas or newlines
(what a user types into a form), or a list of entries. Versions are pinned the usual way
for each installer: ``pandas==2.2.2``, ``psycopg[binary]``, ``pandas>=2,<3``,
``@scope/tool@1.4.0``, ``curl=7.88.1-10``.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

#: Bumped when the meaning of the canonical form changes, so old artifacts are not reused.
CANONICAL_VERSION = 1

#: Base image used by container backends when a recipe names none (Debian 12, like the host).
DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"

#: Names a user environment may not take: the built-in image, and a route under /envs.
RESERVED_NAMES = frozenset({"default", "templates"})

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?$")
# npm: a name, then an exact version, a ^/~ range of one version, or a dist-tag. No
# '|', '<', '>', '*', spaces or URLs: one entry installs one thing the hash can name.
_NPM_RE = re.compile(
    r"^(@[a-z0-9][a-z0-9._-]{0,100}/)?[a-z0-9][a-z0-9._-]{0,100}(@[~^]?[A-Za-z0-9][A-Za-z0-9.+-]{0,63})?$"
)
# Index URLs: scheme, optional user[:password]@, host, optional port, a plain path. No
# query, fragment, '$', backticks, quotes or spaces: nothing a shell or config file could expand.
_URL_RE = re.compile(
    r"^https?://([A-Za-z0-9._~%-]+(:[A-Za-z0-9._~%-]*)?@)?[A-Za-z0-9]([A-Za-z0-9.-]{0,252})(:[0-9]{1,5})?"
    r"(/[A-Za-z0-9._~%/+-]*)?$"
)
_APT_SUITE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,63}$")
_APT_OPTIONS_RE = re.compile(r"^\[([a-z-]+=[A-Za-z0-9._/,:-]+)( [a-z-]+=[A-Za-z0-9._/,:-]+)*\]$")
#: Entries per package list and characters per entry (a 10,000-package list is a DoS, not a recipe).
MAX_ENTRIES = 200
MAX_ENTRY_CHARS = 200
MAX_URL_CHARS = 2048
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
_VERSION_OPS = "<>=!~"


IMAGE_PREFIX = "env-"
"""Image names of sandbox environments: ``env-<image_hash>`` on every backend."""


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
            if rest[:1] and rest[0] in _VERSION_OPS:
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
        if merged and (token[0] in _VERSION_OPS or merged[-1][-1] in _VERSION_OPS + ","):
            merged[-1] += token
        else:
            merged.append(token)
    return merged


def _check_url(value: str | None, field: str) -> str | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    if len(value) > MAX_URL_CHARS:
        raise ValueError(f"must be at most {MAX_URL_CHARS} characters, got {len(value)}")
    if not re.match(r"^https?://[^\s/]+", value):
        raise ValueError(f"must be an http:// or https:// URL, got {_cut(value)!r}")
    if any(ch.isspace() for ch in value):
        raise ValueError(f"must not contain spaces, got {_cut(value)!r}")
    if not _URL_RE.match(value):
        raise ValueError(
            "must be a plain http(s) URL (host, optional port and path; no query, '$', "
            "backticks or quotes), "
            f"got {_cut(value)!r}"
        )
    return value


def _cut(value: str, limit: int = 80) -> str:
    return value if len(value) <= limit else value[:limit] + "..."


def _pip_entry(entry: str, field: str) -> str:
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
    if req.url and not _URL_RE.match(req.url):
        raise ValueError(
            f"{_cut(entry)!r} must reference a plain http(s) URL "
            "(no query, '$', backticks or quotes)"
        )
    req.name = canonicalize_name(req.name)
    return str(req)


class Recipe(BaseModel):
    """A sandbox environment: what its baked image contains and how big its sandbox is.

    Build inputs (hashed): base_image, apt, pip, uv, npm, the registry fields and preload.
    Sizing (cpus, memory_mb, disk_mb) is applied when a sandbox starts. An environment's
    image is named by ``content_hash(include_sizing=True)``: identical to
    ``content_hash()`` for a recipe that sets no resources, distinct for each sizing
    otherwise (E2B templates embed it; the local backend reads it from the image).
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    name: str = Field(description="Identifier: lowercase letters, digits, '.', '_', '-'")
    title: str = Field(default="", max_length=200, description="Display name, e.g. 'Data Science'")
    description: str = Field(default="", max_length=4000)
    base_image: str = Field(default=DEFAULT_BASE_IMAGE, description="Container base image")
    apt: list[str] = Field(default_factory=list, description="Debian packages")
    pip: list[str] = Field(default_factory=list, description="PyPI requirements for pip")
    uv: list[str] = Field(default_factory=list, description="PyPI requirements for uv")
    npm: list[str] = Field(default_factory=list, description="npm packages")
    pip_index_url: str | None = None
    uv_index_url: str | None = None
    npm_registry: str | None = None
    apt_sources: str | None = Field(
        default=None,
        description="One sources.list line, e.g. 'deb https://host/debian bookworm main'",
    )
    cpus: float | None = Field(default=None, gt=0, le=256)
    memory_mb: int | None = Field(default=None, ge=64, le=1024 * 1024)
    disk_mb: int | None = Field(default=None, ge=64, le=16 * 1024 * 1024)
    workspace_default: bool = False
    preload: list[str] = Field(default_factory=list, description="Modules the kernel preloads")
    sdists: bool = Field(
        default=False,
        description=(
            "Allow source distributions: their build backends then run on the host "
            "(trusted packages only)"
        ),
    )
    npm_scripts: bool = Field(
        default=False,
        description="Run npm lifecycle scripts (postinstall...): they then run on the host",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = value.strip()
        if not NAME_RE.match(value):
            raise ValueError(
                f"{value!r} must be 1-63 characters of lowercase letters, digits, "
                "'.', '_' or '-', starting with a letter or digit"
            )
        return value

    @field_validator("base_image")
    @classmethod
    def _base_image(cls, value: str) -> str:
        value = (value or "").strip() or DEFAULT_BASE_IMAGE
        if not _IMAGE_RE.match(value):
            raise ValueError(f"base_image {value!r} is not an image reference")
        return value

    @field_validator("apt", "pip", "uv", "npm", "preload", mode="before")
    @classmethod
    def _split(cls, value: Any) -> list[str]:
        if isinstance(value, str) and len(value) > MAX_ENTRIES * (MAX_ENTRY_CHARS + 1):
            raise ValueError(
                f"at most {MAX_ENTRIES} entries of at most {MAX_ENTRY_CHARS} characters"
            )
        if isinstance(value, (list, tuple)) and len(value) > MAX_ENTRIES:
            raise ValueError(f"at most {MAX_ENTRIES} entries, got {len(value)}")
        try:
            entries = split_list(value)
        except RecipeError as exc:
            raise ValueError(str(exc)) from None
        if len(entries) > MAX_ENTRIES:
            raise ValueError(f"at most {MAX_ENTRIES} entries, got {len(entries)}")
        for entry in entries:
            if len(entry) > MAX_ENTRY_CHARS:
                raise ValueError(f"{_cut(entry)!r} is longer than {MAX_ENTRY_CHARS} characters")
        return entries

    @field_validator("apt")
    @classmethod
    def _apt(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not _APT_RE.match(entry):
                raise ValueError(
                    f"{entry!r} is not a Debian package name (optionally name=version)"
                )
        return value

    @field_validator("pip", "uv")
    @classmethod
    def _pip(cls, value: list[str], info) -> list[str]:
        return [_pip_entry(entry, info.field_name) for entry in value]

    @field_validator("npm")
    @classmethod
    def _npm(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not _NPM_RE.match(entry):
                raise ValueError(
                    f"{entry!r} is not an npm package (name, name@version, "
                    "@scope/name or @scope/name@version)"
                )
        return value

    @field_validator("preload")
    @classmethod
    def _preload(cls, value: list[str]) -> list[str]:
        for entry in value:
            if not _MODULE_RE.match(entry):
                raise ValueError(f"{entry!r} is not a dotted module name")
        return value

    @field_validator("pip_index_url", "uv_index_url", "npm_registry")
    @classmethod
    def _url(cls, value: str | None, info) -> str | None:
        return _check_url(value, info.field_name)

    @field_validator("apt_sources")
    @classmethod
    def _apt_sources(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if "\n" in value.strip() or "\r" in value:
            raise ValueError("must be one sources.list line; a second line is not accepted")
        if len(value) > MAX_URL_CHARS:
            raise ValueError(f"must be at most {MAX_URL_CHARS} characters, got {len(value)}")
        value = " ".join(value.split())
        parts = value.split(" ")
        if parts[0] not in ("deb", "deb-src"):
            raise ValueError(f"must be a 'deb URL suite [components]' line, got {_cut(value)!r}")
        rest = " ".join(parts[1:])
        options = re.match(r"^\[[^\]]*\]", rest)
        if options:
            if not _APT_OPTIONS_RE.match(options.group(0)):
                raise ValueError(
                    f"options {_cut(options.group(0))!r} must be '[key=value ...]' of plain words"
                )
            rest = rest[options.end() :]
        words = rest.split()
        if len(words) < 2:
            raise ValueError(f"needs a URL and a suite, got {_cut(value)!r}")
        _check_url(words[0], "apt_sources")
        for word in words[1:]:
            if not _APT_SUITE_RE.match(word):
                raise ValueError(f"suite and components must be plain words, got {_cut(word)!r}")
        return value

    # -- identity -------------------------------------------------------------------------

    def canonical(self, include_sizing: bool = False) -> dict[str, Any]:
        """The build inputs in a stable form: lists de-duplicated and sorted.

        The name, title, description and workspace flag are left out, so renaming or
        re-describing an environment reuses its image. With ``include_sizing`` the
        resources the recipe sets are added (nothing is added when it sets none, so an
        unsized recipe has one hash either way).
        """
        out: dict[str, Any] = {
            "v": CANONICAL_VERSION,
            "base_image": self.base_image,
            "apt": sorted(set(self.apt)),
            "pip": sorted(set(self.pip)),
            "uv": sorted(set(self.uv)),
            "npm": sorted(set(self.npm)),
            "pip_index_url": self.pip_index_url,
            "uv_index_url": self.uv_index_url,
            "npm_registry": self.npm_registry,
            "apt_sources": self.apt_sources,
            "preload": sorted(set(self.preload)),
        }
        for opt_in in (
            "sdists",
            "npm_scripts",
        ):  # only when set: the hashes of other recipes stay as they were
            if getattr(self, opt_in):
                out[opt_in] = True
        if include_sizing and self.sizing():
            out.update(cpus=self.cpus, memory_mb=self.memory_mb, disk_mb=self.disk_mb)
        return out

    def image_hash(self) -> str:
        """Names the environment's image (``env-<image_hash>``): the build inputs plus the sizing
        it sets."""
        return self.content_hash(include_sizing=True)

    def sizing(self) -> dict[str, Any]:
        """The resources the recipe sets (``cpus``, ``memory_mb``, ``disk_mb``), without unset
        ones."""
        return {
            k: v
            for k, v in (
                ("cpus", self.cpus),
                ("memory_mb", self.memory_mb),
                ("disk_mb", self.disk_mb),
            )
            if v is not None
        }

    def content_hash(self, include_sizing: bool = False) -> str:
        """16 hex digits of SHA-256 over ``canonical()``; names the artifact on every backend."""
        blob = json.dumps(self.canonical(include_sizing), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def python_requirements(self) -> list[str]:
        """pip and uv entries together: one installer step installs both lists."""
        return list(dict.fromkeys([*self.pip, *self.uv]))

    # -- TOML -----------------------------------------------------------------------------

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Recipe:
        """Validate a mapping, turning pydantic's errors into one readable ``RecipeError``."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise RecipeError(format_errors(exc)) from None

    @classmethod
    def from_toml(cls, text: str) -> Recipe:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise RecipeError(f"recipe is not valid TOML: {exc}") from None
        return cls.from_dict(data)

    def to_toml(self) -> str:
        data = self.model_dump(exclude_none=True)
        return tomli_w.dumps(data)

    @classmethod
    def load(cls, path: str | Path) -> Recipe:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RecipeError(f"cannot read recipe {path}: {exc}") from None
        try:
            return cls.from_toml(text)
        except RecipeError as exc:
            raise RecipeError(f"{path.name}: {exc}") from None

    def dump(self, path: str | Path) -> None:
        """Write atomically (temp file + rename), so a crash never leaves half a recipe."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(self.to_toml(), encoding="utf-8")
        tmp.replace(path)


def format_errors(exc: ValidationError) -> str:
    """One line per invalid field: ``field: reason``."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "recipe"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {msg}")
    return "; ".join(lines)
