"""Import openenv without the Gradio web UI it loads eagerly.

``openenv.core`` imports its Gradio playground (~2.3 s of a ~3.6 s import on the
reference machine, BENCHMARKS.md) inside ``try/except ModuleNotFoundError``.
analyst_env serves its own ``/web`` page and never uses that UI. So, when nothing
in the process has imported gradio or openenv yet, gradio is hidden for the
duration of openenv's import and restored right after: a later ``import gradio``
works as usual; only openenv's ``create_web_interface_app`` stays ``None`` in this
process. Trainer workers pay the client import at every start, which is why this
matters. Set ``ANALYST_ENV_OPENENV_GRADIO=1`` to keep openenv's own behaviour.
"""

from __future__ import annotations

import os
import sys


def load_openenv() -> None:
    """Import ``openenv.core`` once, skipping its unused Gradio UI when that is safe."""
    if "openenv.core" in sys.modules or "gradio" in sys.modules:
        return
    if os.environ.get("ANALYST_ENV_OPENENV_GRADIO") == "1":
        import openenv.core  # noqa: F401

        return
    sys.modules["gradio"] = None  # type: ignore[assignment]  # makes `import gradio` fail fast
    try:
        import openenv.core  # noqa: F401
    finally:
        if sys.modules.get("gradio", 0) is None:
            del sys.modules["gradio"]
