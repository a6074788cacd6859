"""The mistakes ``analyst-env`` commands check for before they start anything, and the one line
each is answered with.

A mistake on the command line (an unknown dataset, a seed that is not a number, a folder,
file or server that is not there, a port another server holds, an optional SDK not
installed) is found in the first process, before workers fork or a server starts, and
answered with one ``analyst-env: error: ...`` line on stderr and exit status 2. The same
line for every command, because a traceback from each of several workers tells a user
less than one sentence does, and a wrapper script can test for status 2.

``Parser`` makes argparse's own mistakes (an unknown flag, a missing argument) follow the
same one-line rule and shows every option's default in ``--help``. ``cli.py``,
``eval_cli.py`` and ``envs_cli.py`` share this module (not ``cli.py``, which also runs as
``python -m analyst_env.cli`` for ``serve``'s workers: as ``__main__`` its exception
classes would not be the ones the other modules raise).
"""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path

PROG = "analyst-env"
USAGE_STATUS = 2

DATASET_HELP = (
    "The tasks: a shipped set (starter); procedural:SEED, tasks made on demand from an "
    "integer SEED (e.g. procedural:7); tasks:DIR, a folder written by 'analyst-env generate'; "
    "or NAME:PATH, a benchmark folder in a known format (dabench:PATH, spider:PATH, ...; "
    "'analyst-env tasks' lists them)"
)

# An optional dependency's top-level module -> the extra that installs it (pyproject.toml).
OPTIONAL_MODULES = {
    "docker": "docker",
    "modal": "modal",
    "e2b": "e2b",
    "e2b_code_interpreter": "e2b",
    "opensandbox": "opensandbox",
    "torch": "trl",
    "trl": "trl",
    "transformers": "trl",
    "tokenizers": "trl",
    "skyrl_gym": "skyrl",
    "pyarrow": "skyrl",
    "jupyter_client": "dev",
    "ipykernel": "dev",
}


class UsageError(Exception):
    """A mistake on the command line: printed as one ``analyst-env: error:`` line, status 2."""


def error_line(message: object) -> str:
    """The one line a mistake is answered with."""
    return f"{PROG}: error: {message}"


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """The error line for an optional dependency that is not installed, or None for any other
    missing module (a broken install, whose traceback is worth seeing)."""
    top = (exc.name or "").partition(".")[0]
    extra = OPTIONAL_MODULES.get(top)
    if extra is None:
        return None
    return error_line(
        f"this needs the optional package {top!r}: pip install 'analyst-env[{extra}]'"
    )


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option with a default shows it (unless its help already
    says it: several defaults come from ``ANALYST_ENV_*`` variables and are spelled out)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            not action.option_strings
            or action.default in (None, False, argparse.SUPPRESS)
            or "default" in text.lower()
        ):
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``analyst-env: error: ...``, status 2) and defaults shown.

    Subcommand parsers are made of the same class (argparse's default), so ``serve``,
    ``eval`` and every other command answer alike.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(USAGE_STATUS, error_line(f"{message} (see '{self.prog} --help')") + "\n")


def settings_from_args(args: argparse.Namespace):
    """``Settings`` of a command, or ``UsageError`` naming each bad value (flag or variable)
    on one line, not pydantic's multi-line report."""
    from pydantic import ValidationError

    from analyst_env.server.settings import Settings

    try:
        return Settings.from_args(args)
    except ValidationError as exc:
        reasons = "; ".join(
            f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise UsageError(f"invalid setting ({reasons})") from None


def _known_datasets() -> str:
    """Every spec shape ``--dataset`` takes, plugins' formats included (for an error line)."""
    from analyst_env.datasets.registry import FORMAT_REGISTRY, GENERATED, SHIPPED

    known = [*sorted(SHIPPED), *(f"{f}:SEED" for f in GENERATED)]
    known += [f"{f}:{'DIR' if f == 'tasks' else 'PATH'}" for f in FORMAT_REGISTRY]
    return ", ".join(known)


def check_dataset(spec: str | None, *, several: bool = False) -> None:
    """Raise ``UsageError`` if ``spec`` cannot name a dataset, without loading it.

    Cheap on purpose: ``serve`` checks in its supervisor, and each worker then loads the
    set itself. ``several``: a comma-separated list (``serve`` serves them together).
    What a loader finds wrong inside an existing folder is its own error, later.
    """
    if spec is None:
        return
    from analyst_env.datasets.registry import FORMAT_REGISTRY, GENERATED, SHIPPED

    specs = [s.strip() for s in spec.split(",")] if several else [spec.strip()]
    if not any(specs):
        raise UsageError("--dataset is empty; " + DATASET_HELP)
    for one in filter(None, specs):
        if one in SHIPPED:
            continue
        fmt, sep, rest = one.partition(":")
        if sep and fmt in GENERATED:
            try:
                int(rest)
            except ValueError:
                raise UsageError(
                    f"--dataset {one}: {fmt}:SEED needs an integer seed, got {rest!r} "
                    f"(e.g. {fmt}:7)"
                ) from None
            continue
        if not sep:
            raise UsageError(f"unknown dataset {one!r}; known: {_known_datasets()}")
        if fmt not in FORMAT_REGISTRY:
            raise UsageError(
                f"unknown dataset format {fmt!r} in {one!r}; known: {_known_datasets()}"
            )
        if not rest:
            raise UsageError(f"--dataset {one}: no path after '{fmt}:'")
        path = Path(rest).expanduser()
        if fmt == "tasks":
            from analyst_env.datasets.procedural.taskdir import TASKS_FILE

            if not path.is_dir():
                raise UsageError(
                    f"--dataset {one}: no folder {rest!r} (tasks:DIR names a folder written "
                    "by 'analyst-env generate --out DIR')"
                )
            if not (path / TASKS_FILE).is_file():
                raise UsageError(f"--dataset {one}: {rest!r} holds no {TASKS_FILE}")
        elif (FORMAT_REGISTRY.spec(fmt) or "").startswith("analyst_env.") and not path.exists():
            # this package's loaders read a folder; a format registered from elsewhere may
            # take another kind of name (the tests' registered sets do)
            raise UsageError(f"--dataset {one}: no such file or folder {rest!r}")


def check_port(host: str, port: int) -> None:
    """Raise ``UsageError`` unless ``host:port`` can be bound now; the socket is released at once.

    Bound as uvicorn and ``serve --workers`` bind it (``SO_REUSEADDR``, IPv6 for an address
    with a colon), so a port another server listens on fails here, before any worker or
    sandbox starts, rather than after start-up as uvicorn's ``[Errno 98]``.
    """
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be 0-65535, got {port}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except socket.gaierror as exc:
            raise UsageError(f"--host {host!r}: {exc.strerror}") from None
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(
                    f"port {port} on {host} is in use (another server?); choose another --port"
                ) from None
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def check_backend(name: str) -> None:
    """Raise ``UsageError`` for an unknown sandbox backend or one whose SDK is not installed."""
    from analyst_env.envs.backend_catalog import BACKEND_CATALOG, importable
    from analyst_env.envs.backends import BACKEND_REGISTRY

    if name not in BACKEND_REGISTRY:
        raise UsageError(BACKEND_REGISTRY.unknown(name))
    info = BACKEND_CATALOG.get(name)  # None for a plugin's backend
    if info is not None and info.sdk and not importable(info.sdk):
        raise UsageError(
            f"the {name} backend needs the optional package {info.sdk!r}: "
            f"pip install 'analyst-env[{info.extra}]'"
        )


def check_server(url: str, token: str | None, timeout_s: float = 10.0) -> None:
    """Raise ``UsageError`` unless an analyst-env server answers at ``url`` (and takes ``token``).

    Asked once before a command plays anything, so a wrong URL or token is one line, not
    an error per episode.
    """
    import httpx

    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError(f"--url {url!r} is not an http:// or https:// URL")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        health = httpx.get(f"{base}/health", timeout=timeout_s)
        info = httpx.get(f"{base}/metadata", headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise UsageError(
            f"cannot reach the server at {url} ({exc or type(exc).__name__}); "
            "start one with 'analyst-env serve'"
        ) from None
    if health.status_code != 200:
        raise UsageError(f"{url} is not an analyst-env server (GET /health: {health.status_code})")
    if info.status_code == 401:
        raise UsageError(
            f"the server at {url} refused the bearer token: "
            + ("pass the right --token" if token else "it needs --token")
        )


def check_output_file(path: str | None) -> None:
    """Raise ``UsageError`` if a file to be written at the end could not be: checked first, so
    a long run does not end on a missing folder. Its folder is made if missing."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise UsageError(f"{path!r} is a folder; name a file to write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot write {path!r}: {exc.strerror}") from None


def check_input_path(path: str | None, flag: str, *, folder: bool = False) -> None:
    """Raise ``UsageError`` if ``path`` (given as ``flag``) is not there."""
    if path is None:
        return
    target = Path(path).expanduser()
    if folder and not target.is_dir():
        raise UsageError(f"{flag} {path!r}: no such folder")
    if not folder and not target.is_file():
        raise UsageError(f"{flag} {path!r}: no such file")
