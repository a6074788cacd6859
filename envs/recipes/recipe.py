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
import os
import re
import threading
import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from analyst_env.envs.recipes.fields import (
    APT_OPTIONS_RE,
    APT_RE,
    APT_SUITE_RE,
    IMAGE_RE,
    MAX_ENTRIES,
    MAX_ENTRY_CHARS,
    MAX_URL_CHARS,
    MODULE_RE,
    NAME_RE,
    NPM_RE,
    RecipeError,
    check_url,
    cut,
    each_matching,
    pip_entry,
    split_list,
)

#: Bumped when the meaning of the canonical form changes, so old artifacts are not reused.
CANONICAL_VERSION = 1

#: Base image used by container backends when a recipe names none (Debian 12, like the host).
DEFAULT_BASE_IMAGE = "python:3.11-slim-bookworm"

#: Names a user environment may not take: the built-in image, and a route under /envs.
RESERVED_NAMES = frozenset({"default", "templates"})

IMAGE_PREFIX = "env-"
"""Image names of sandbox environments: ``env-<image_hash>`` on every backend, and
``env-<image_hash>.<revision>`` for the builds a forced rebuild made (``image_name``)."""

_BUILD_DIR = re.compile(r"[0-9a-f]{1,64}(\.[1-9][0-9]{0,8})?")


def image_name(digest: str, revision: int = 0) -> str:
    """The image a build serves: revision 0 is the first build of ``digest``; each forced
    rebuild makes the next one beside it, so episodes of the last keep their files."""
    return f"{IMAGE_PREFIX}{digest}" + (f".{revision}" if revision else "")


def build_dir_name(image: str) -> str | None:
    """The folder under ``envs/images`` holding the build ``image`` names (``<hash>`` or
    ``<hash>.<revision>``), or None when ``image`` names no build."""
    rest = image[len(IMAGE_PREFIX) :] if image.startswith(IMAGE_PREFIX) else ""
    return rest if _BUILD_DIR.fullmatch(rest) else None


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
        if not IMAGE_RE.match(value):
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
                raise ValueError(f"{cut(entry)!r} is longer than {MAX_ENTRY_CHARS} characters")
        return entries

    @field_validator("apt")
    @classmethod
    def _apt(cls, value: list[str]) -> list[str]:
        return each_matching(value, APT_RE, "a Debian package name (optionally name=version)")

    @field_validator("pip", "uv")
    @classmethod
    def _pip(cls, value: list[str], info) -> list[str]:
        return [pip_entry(entry, info.field_name) for entry in value]

    @field_validator("npm")
    @classmethod
    def _npm(cls, value: list[str]) -> list[str]:
        return each_matching(
            value, NPM_RE, "an npm package (name, name@version, @scope/name or @scope/name@version)"
        )

    @field_validator("preload")
    @classmethod
    def _preload(cls, value: list[str]) -> list[str]:
        return each_matching(value, MODULE_RE, "a dotted module name")

    @field_validator("pip_index_url", "uv_index_url", "npm_registry")
    @classmethod
    def _url(cls, value: str | None, info) -> str | None:
        return check_url(value, info.field_name)

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
            raise ValueError(f"must be a 'deb URL suite [components]' line, got {cut(value)!r}")
        rest = " ".join(parts[1:])
        options = re.match(r"^\[[^\]]*\]", rest)
        if options:
            if not APT_OPTIONS_RE.match(options.group(0)):
                raise ValueError(
                    f"options {cut(options.group(0))!r} must be '[key=value ...]' of plain words"
                )
            rest = rest[options.end() :]
        words = rest.split()
        if len(words) < 2:
            raise ValueError(f"needs a URL and a suite, got {cut(value)!r}")
        check_url(words[0], "apt_sources")
        for word in words[1:]:
            if not APT_SUITE_RE.match(word):
                raise ValueError(f"suite and components must be plain words, got {cut(word)!r}")
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

    def dump(self, path: str | Path, *, exclusive: bool = False) -> None:
        """Write atomically (temp file + rename), so a crash never leaves half a recipe.

        ``exclusive``: the file must not exist yet (``FileExistsError``); the check and the
        write are one step (a hard link), so two processes creating it cannot both succeed.
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Named per process and thread: two writers of one recipe never share a temp file.
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        text = self.to_toml()
        tmp.write_text(text, encoding="utf-8")
        try:
            if not exclusive:
                tmp.replace(path)
                return
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise
            except OSError:  # a file system without hard links: exclusive, if not atomic
                with open(path, "x", encoding="utf-8") as f:
                    f.write(text)
        finally:
            tmp.unlink(missing_ok=True)


def format_errors(exc: ValidationError) -> str:
    """One line per invalid field: ``field: reason``."""
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "recipe"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{where}: {msg}")
    return "; ".join(lines)
