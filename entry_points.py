"""``"package.module:attribute"`` strings: name an object now, import its module when used.

The tables that map a name to an implementation (sandbox backends, dataset
formats) hold such strings, so listing what exists imports nothing: importing
``analyst_env`` stays cheap, and a backend's SDK is imported only by the server
that runs it.

Example:
    >>> load_entry_point("os.path:join")("a", "b")
    'a/b'
"""

from __future__ import annotations

import importlib
from typing import Any


def load_entry_point(spec: str) -> Any:
    """The object ``spec`` (``"package.module:attribute"``) names, importing its module.

    Raises:
        ImportError: The module cannot be imported.
        AttributeError: The module has no such attribute.
    """
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
