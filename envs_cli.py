"""``analyst-env envs list|show|create|build|delete``: manage a server's sandbox environments.

The commands talk to a running server's ``/envs`` routes (``--url``, default
``$ANALYST_ENV_URL`` or ``http://127.0.0.1:8000``; ``--token`` or ``$ANALYST_ENV_TOKEN``),
because builds run in the server, next to the backend whose images they produce.
``create`` and ``build`` follow the build with a progress bar until it is ready or
failed (``--no-wait`` returns at once); a failed build prints the installer's error and
exits 1, as does a server's refusal; a server that cannot be reached, or a ``--file`` that
is not there, is a mistake on the command line (``cli_checks.py``: one line, status 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from analyst_env.cli_checks import USAGE_STATUS, error_line

DEFAULT_URL = "http://127.0.0.1:8000"
_FIELDS = ("pip", "uv", "npm", "apt", "preload")
_STRING_FIELDS = (
    "description",
    "title",
    "pip_index_url",
    "uv_index_url",
    "npm_registry",
    "apt_sources",
    "base_image",
)


class CliError(Exception):
    """Printed as one ``analyst-env: error: ...`` line with exit status ``status``: 1 for what
    the server refused or a build that failed, 2 for a mistake on the command line."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def add_parser(sub) -> None:
    """Register ``envs`` and its subcommands on the top-level subparsers."""
    envs = sub.add_parser(
        "envs", help="Sandbox environments of a running server: list, show, create, build, delete"
    )
    what = envs.add_subparsers(dest="envs_command", required=True)

    def common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--url",
            default=os.environ.get("ANALYST_ENV_URL", DEFAULT_URL),
            help=f"Server URL (default $ANALYST_ENV_URL or {DEFAULT_URL})",
        )
        p.add_argument("--token", default=os.environ.get("ANALYST_ENV_TOKEN"), help="Bearer token")
        p.set_defaults(func=run)
        return p

    ls = common(what.add_parser("list", help="Environments and their build status"))
    ls.add_argument("--templates", action="store_true", help="List the built-in templates instead")
    ls.add_argument("--json", action="store_true", help="Print JSON")
    show = common(what.add_parser("show", help="One environment's recipe and build status"))
    show.add_argument("name", help="The environment's name")
    show.add_argument("--log", action="store_true", help="Also print the latest build log")
    show.add_argument("--json", action="store_true", help="Print JSON")
    create = common(
        what.add_parser(
            "create", help="Create an environment (from a template or fields); it builds"
        )
    )
    create.add_argument("name", help="The new environment's name")
    create.add_argument(
        "--template", help="Copy this built-in template (see 'envs list --templates')"
    )
    create.add_argument(
        "--file", help="Read the recipe from this TOML file (its name is replaced by NAME)"
    )
    for field in _FIELDS:
        create.add_argument(
            f"--{field}", help=f"{field} entries, separated by spaces, commas or newlines"
        )
    for field in _STRING_FIELDS:
        create.add_argument(
            f"--{field.replace('_', '-')}", dest=field, help=f"The recipe's {field} (a string)"
        )
    create.add_argument("--cpus", type=float, help="CPUs per sandbox")
    create.add_argument("--memory-mb", type=int, dest="memory_mb", help="Memory per sandbox, MiB")
    create.add_argument("--disk-mb", type=int, dest="disk_mb", help="Disk per sandbox, MiB")
    create.add_argument(
        "--workspace-default",
        action="store_true",
        default=None,
        dest="workspace_default",
        help="Run tasks whose image is 'default' in this environment",
    )
    create.add_argument("--no-wait", action="store_true", help="Do not follow the build")
    build = common(
        what.add_parser(
            "build", help="Build an environment's image (follows it with a progress bar)"
        )
    )
    build.add_argument("name", help="The environment's name")
    build.add_argument("--force", action="store_true", help="Rebuild even if the image is ready")
    build.add_argument("--no-wait", action="store_true", help="Do not follow the build")
    delete = common(
        what.add_parser("delete", help="Delete an environment (bound tasks fall back to 'default')")
    )
    delete.add_argument("name", help="The environment's name")


def run(args: argparse.Namespace) -> int:
    try:
        if not args.url.startswith(("http://", "https://")):
            raise CliError(f"--url {args.url!r} is not an http:// or https:// URL", USAGE_STATUS)
        return _COMMANDS[args.envs_command](args, _Client(args.url, args.token))
    except CliError as exc:
        print(error_line(exc), file=sys.stderr)
        return exc.status


class _Client:
    def __init__(self, url: str, token: str | None) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=30.0)
        self.url = url

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(
                f"cannot reach the server at {self.url} ({exc}); "
                "start one with 'analyst-env serve'",
                USAGE_STATUS,
            ) from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except ValueError:
                detail = response.text
            raise CliError(f"{detail} (HTTP {response.status_code})")
        return response.json()


def _list(args, client: _Client) -> int:
    if args.templates:
        templates = client.call("GET", "/envs/templates")["templates"]
        if args.json:
            print(json.dumps(templates, indent=2))
            return 0
        for t in templates:
            print(f"{t['name']:<20} {t['title']:<22} {' '.join(t['pip'] + t['uv'])}")
        return 0
    envs = client.call("GET", "/envs")["environments"]
    if args.json:
        print(json.dumps(envs, indent=2))
        return 0
    if not envs:
        print(
            "no sandbox environments; create one with "
            "'analyst-env envs create NAME --template data-science'"
        )
        return 0
    print(f"{'NAME':<24} {'STATUS':<9} {'HASH':<17} DESCRIPTION")
    for e in envs:
        status = e["status"] + (
            f" {e['progress']:.0%}" if e["status"] == "building" and e["progress"] else ""
        )
        print(f"{e['name']:<24} {status:<9} {e['hash']:<17} {e['description'][:60]}")
        if e["error"]:
            print(f"{'':<24} error: {e['error'].splitlines()[-1][:100]}")
    return 0


def _show(args, client: _Client) -> int:
    env = client.call("GET", f"/envs/{args.name}")
    if args.json:
        print(json.dumps(env, indent=2))
    else:
        print(f"{env['name']}: {env['status']} (image {env['hash']})")
        if env["elapsed_s"] is not None:
            print(f"  build time: {env['elapsed_s']:.1f}s")
        if env["error"]:
            print("  error: " + env["error"].replace("\n", "\n         "))
        for key, value in env["recipe"].items():
            if value not in (None, "", [], False) and key != "name":
                print(f"  {key}: {' '.join(value) if isinstance(value, list) else value}")
    if args.log:
        print(client.call("GET", f"/envs/{args.name}/logs")["log"], end="")
    return 0


def _create(args, client: _Client) -> int:
    body: dict[str, Any] = {}
    if args.file:
        from analyst_env.envs.recipes import Recipe, RecipeError

        if not os.path.isfile(args.file):
            raise CliError(f"--file {args.file!r}: no such file", USAGE_STATUS)
        try:
            body.update(Recipe.load(args.file).model_dump(exclude_none=True))
        except RecipeError as exc:
            raise CliError(str(exc)) from None
    for field in (*_FIELDS, *_STRING_FIELDS, "cpus", "memory_mb", "disk_mb", "workspace_default"):
        value = getattr(args, field)
        if value is not None:
            body[field] = value
    body["name"] = args.name
    if args.template:
        body["template"] = args.template
    env = client.call("POST", "/envs", json=body)
    print(f"created {env['name']} (image {env['hash']}): {env['status']}")
    return 0 if args.no_wait else _follow(client, args.name)


def _build(args, client: _Client) -> int:
    env = client.call(
        "POST", f"/envs/{args.name}/build", params={"force": "true" if args.force else "false"}
    )
    if env["status"] == "ready" and not args.force:
        print(f"{args.name} is ready (image {env['hash']}); --force rebuilds it")
        return 0
    return 0 if args.no_wait else _follow(client, args.name)


def _delete(args, client: _Client) -> int:
    client.call("DELETE", f"/envs/{args.name}")
    print(f"deleted {args.name}; tasks bound to it now run in the default image")
    return 0


def _follow(client: _Client, name: str, poll_s: float = 0.5) -> int:
    """A progress bar until the build ends; exit status 0 when ready, 1 when failed."""
    from tqdm import tqdm

    bar = tqdm(
        total=100,
        desc=f"building {name}",
        unit="%",
        file=sys.stderr,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} {postfix}",
    )
    try:
        while True:
            env = client.call("GET", f"/envs/{name}/status")
            done = round(100 * (env["progress"] or 0))
            bar.update(max(0, done - bar.n))
            bar.set_postfix_str(env["status"])
            if env["status"] in ("ready", "failed"):
                break
            time.sleep(poll_s)
    finally:
        bar.close()
    if env["status"] == "failed":
        print(
            f"{name}: build failed after {env['elapsed_s'] or 0:.1f}s:\n{env['error']}",
            file=sys.stderr,
        )
        return 1
    print(f"{name}: ready in {env['elapsed_s'] or 0:.1f}s (image {env['hash']})")
    return 0


_COMMANDS = {"list": _list, "show": _show, "create": _create, "build": _build, "delete": _delete}
