"""``analyst-env backends``: every sandbox backend, and what each still needs on this host.

A user who already pays for a sandbox platform starts here: the list says which
backends exist, whether the extra that installs each one's SDK is installed, and which
credentials are still unset (``envs/backend_catalog.py``). It looks, it never contacts a
service; ``ANALYST_ENV_BACKEND=NAME analyst-env serve`` then checks for real.
"""

from __future__ import annotations

import argparse
import json

_HINT = "Use one with: ANALYST_ENV_BACKEND=NAME analyst-env serve (docs/backends.md)"


def cmd_backends(args: argparse.Namespace) -> int:
    from analyst_env.envs.backend_catalog import describe
    from analyst_env.envs.backends import BACKEND_REGISTRY

    names = list(BACKEND_REGISTRY)  # the package's own, then installed plugins'
    found = [(name, *describe(name, BACKEND_REGISTRY.spec(name))) for name in names]
    if args.json:
        rows = [
            {
                "name": name,
                "summary": info.summary,
                "extra": info.extra,
                "installed": ready.installed,
                "usable": ready.usable,
                "missing": list(ready.missing),
            }
            for name, info, ready in found
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(name) for name in names)
    for name, info, ready in found:
        state = "ready" if ready.usable else "needs: " + "; ".join(ready.missing)
        print(f"{name:<{width}}  {info.summary}")
        print(f"{'':<{width}}  {state}")
    print(_HINT)
    return 0


def add_parser(sub) -> None:
    """Register ``backends`` on the top-level subparsers."""
    backends = sub.add_parser(
        "backends",
        help="List the sandbox backends and what each still needs here",
        description="List the sandbox backends: what each runs episodes on, whether its "
        "SDK's extra is installed and which credentials are still unset. Nothing is contacted.",
    )
    backends.add_argument("--json", action="store_true", help="Print the list as JSON")
    backends.set_defaults(func=cmd_backends)
