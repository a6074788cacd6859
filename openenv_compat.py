"""Import openenv without the parts of it analyst_env does not use.

Two costs, two remedies:

- ``openenv.core`` imports its Gradio playground (~2.3 s of a ~3.6 s import on the
  reference machine, docs/benchmarks-history.md) inside ``try/except ModuleNotFoundError``.
  analyst_env serves its own ``/web`` page and never uses that UI. So, when nothing
  in the process has imported gradio yet, gradio is hidden for the duration of
  openenv's import and restored right after: a later ``import gradio`` works as
  usual; only openenv's ``create_web_interface_app`` stays ``None`` in this process.
  Set ``ANALYST_ENV_OPENENV_GRADIO=1`` to keep openenv's own behaviour.
- The packages ``openenv.core`` and ``openenv.core.env_server`` import, in their
  ``__init__``, openenv's whole server stack (FastAPI, FastMCP, the MCP SDK), even
  for a process that only wants the wire types (``env_server.types``,
  ``env_server.mcp_types``) and the WebSocket client (``env_client``), which import
  none of it. A client process (trainer workers pay the import at every start)
  calls ``load_openenv_wire``: the two packages are put in ``sys.modules`` with
  their ``__init__`` not yet run, their submodules import as usual, and the first
  use of a name the ``__init__`` defines (``from openenv.core import EnvClient``)
  runs it then, in full. A server process calls ``load_openenv``, which runs them
  at once; either way every module is imported once, so the classes are the same.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

_LAZY_PACKAGES = ("openenv.core", "openenv.core.env_server")
_deferred: dict[str, ModuleType] = {}
_lock = threading.RLock()


def load_openenv() -> None:
    """Import ``openenv.core`` in full once, skipping its unused Gradio UI when that is safe."""
    if "openenv.core" in sys.modules:
        _run_deferred_inits()
        return
    if "gradio" in sys.modules or os.environ.get("ANALYST_ENV_OPENENV_GRADIO") == "1":
        import openenv.core  # noqa: F401

        return
    with _gradio_hidden():
        import openenv.core  # noqa: F401


def load_openenv_wire() -> None:
    """Make openenv's wire types and client importable without its server stack.

    After this, ``openenv.core.env_server.types``, ``openenv.core.env_server.mcp_types``,
    ``openenv.core.client_types`` and ``openenv.core.env_client`` import without
    FastAPI, FastMCP or Gradio; anything else of openenv still imports as usual.
    """
    if "openenv.core" in sys.modules:  # imported already, in full or deferred
        return
    if os.environ.get("ANALYST_ENV_OPENENV_GRADIO") == "1":
        load_openenv()
        return
    with _lock:
        if "openenv.core" in sys.modules:
            return
        import openenv  # its __init__ imports nothing of openenv.core

        parent: ModuleType = openenv
        for name in _LAZY_PACKAGES:
            parent = _defer_init(name, parent)


def _defer_init(name: str, parent: ModuleType) -> ModuleType:
    """Put the package ``name`` in ``sys.modules`` with its ``__init__`` left for later."""
    spec = importlib.machinery.PathFinder.find_spec(name, parent.__path__)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)

    def __getattr__(attr: str) -> Any:
        _run_deferred_inits()
        return getattr(module, attr)

    module.__dict__["__getattr__"] = __getattr__
    _deferred[name] = module
    sys.modules[name] = module
    setattr(parent, name.rpartition(".")[2], module)
    return module


def _run_deferred_inits() -> None:
    """Run the ``__init__`` of every package ``load_openenv_wire`` left for later."""
    with _lock:
        for name in _LAZY_PACKAGES:
            module = _deferred.pop(name, None)
            if module is None:
                continue
            del module.__dict__["__getattr__"]
            assert module.__spec__ is not None and module.__spec__.loader is not None
            hide = "gradio" not in sys.modules
            with _gradio_hidden() if hide else contextlib.nullcontext():
                module.__spec__.loader.exec_module(module)


@contextlib.contextmanager
def _gradio_hidden() -> Iterator[None]:
    """Make ``import gradio`` fail fast inside the block (openenv then skips its UI)."""
    sys.modules["gradio"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.modules.get("gradio", 0) is None:
            del sys.modules["gradio"]
