"""Old import paths of modules that moved, kept working with a ``DeprecationWarning``.

The evaluation harness and the trainer adapters used to live under ``analyst_env.client``
(``analyst_env.client.evaluation.*``, ``analyst_env.client.trainers.*``), and so did the
server-in-a-thread helper (``analyst_env.client.local_server``). Scripts that
still import those names get the moved module itself, not a copy: the old name is bound
to the same module object in ``sys.modules``, so there is one implementation and
patching either name patches both. The warning names the new path to import instead.
"""

from __future__ import annotations

import sys
import warnings
from types import ModuleType


def alias_moved_module(old_name: str, moved: ModuleType) -> None:
    """Make ``old_name`` the module ``moved`` and warn that it moved.

    Called from the old module's own body: the import system returns what
    ``sys.modules[old_name]`` holds once that body has run, so the importer gets
    ``moved``. The warning is attributed to the importing line (the import system's
    own frames are skipped by ``warnings``).
    """
    warnings.warn(
        f"{old_name} moved to {moved.__name__}; import {moved.__name__} instead",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old_name] = moved
