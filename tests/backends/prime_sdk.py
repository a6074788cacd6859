"""Where the tests find ``prime-sandboxes``: installed, or in ``.venv/prime``.

``prime-sandboxes`` 0.5.1 pins ``connectrpc<0.12`` and e2b ``>=0.12.1``, so the SDK is not in
the ``dev`` extra: ``.ci/run`` installs it without its dependencies into ``.venv/prime``, and
the tests append that folder to ``sys.path``, after this venv's packages, so the SDK runs on
this venv's connectrpc, protobuf and pyqwest (``test_prime_backend.py`` shows that it does).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

FOLDER = os.path.join(os.path.dirname(__file__), "..", "..", ".venv", "prime")
INSTALL = "pip install --no-deps --target .venv/prime 'prime-sandboxes==0.5.1' tenacity"


def require_prime_sdk() -> None:
    """Make ``prime_sandboxes`` importable, or skip the test with the line that installs it."""
    if importlib.util.find_spec("prime_sandboxes") is not None:
        return
    folder = os.path.realpath(FOLDER)
    if not os.path.isdir(os.path.join(folder, "prime_sandboxes")):
        pytest.skip(f"prime-sandboxes is not installed ({INSTALL})")
    sys.path.append(folder)
