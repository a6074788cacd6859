"""``"package.module:attribute"`` strings: name an object now, import its module when used.

The tables that map a name to an implementation (sandbox backends, dataset
formats, scorers) hold such strings, so listing what exists imports nothing: importing
``analyst_env`` stays cheap, and a backend's SDK is imported only by the server
that runs it. :class:`Registry` is such a table with the installed plugins' entry
points added: the one way a part is registered.

Example:
    >>> load_entry_point("os.path:join")("a", "b")
    'a/b'
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any


def load_entry_point(spec: str) -> Any:
    """The object ``spec`` (``"package.module:attribute"``) names, importing its module.

    Raises:
        ImportError: The module cannot be imported.
        AttributeError: The module has no such attribute.
    """
    module_name, _, attribute = spec.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class Registry(MutableMapping[str, Any]):
    """One kind of pluggable part (sandbox backends, dataset formats, scorers): a name to
    the object a ``"module:attribute"`` string names, loaded on first use and kept.

    The package's own parts are the ``table`` its module writes out, one line each;
    another installed package adds its own through the Python entry-point ``group``
    (``[project.entry-points."analyst_env.scorers"]`` in its ``pyproject.toml``), so a
    part is added the same way inside the package and out of it. A plugin never replaces
    a part of the package's own under the same name (that name keeps meaning what the
    documentation says). Setting an item puts an object made in a running process (a
    test, a notebook) under a name, in that process only.
    """

    def __init__(self, kind: str, table: dict[str, str], group: str) -> None:
        self.kind, self.table, self.group = kind, table, group
        self._loaded: dict[str, Any] = {}
        self._added: dict[str, Any] = {}

    def plugins(self) -> dict[str, str]:
        """The installed packages' entries of :attr:`group` (``name: "module:attribute"``).

        Reading them scans every installed distribution (~20 ms in a full environment), so
        it is done only for a name the table does not have, and once per ``sys.path``."""
        return dict(_installed_entry_points(self.group, tuple(sys.path)))

    def spec(self, name: str) -> str | None:
        """Where ``name`` lives (``"module:attribute"``); None if it is unknown or added."""
        if name in self.table:
            return self.table[name]
        return None if name in self._added else self.plugins().get(name)

    def __setitem__(self, name: str, obj: Any) -> None:
        """Put ``obj`` under ``name`` in this process only (a part made at run time, or a
        test standing in for one of the package's own)."""
        self._added[name] = obj

    def __delitem__(self, name: str) -> None:
        del self._added[name]

    def __getitem__(self, name: str) -> Any:
        if name in self._added:
            return self._added[name]
        if name not in self._loaded:
            spec = self.spec(name)
            if spec is None:
                raise KeyError(name)
            self._loaded[name] = load_entry_point(spec)
        return self._loaded[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._added or self.spec(name) is not None)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self.table, *self.plugins(), *self._added]))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def unknown(self, name: str) -> str:
        """The one line for a name nothing is registered under."""
        return f"unknown {self.kind} {name!r}; available: {', '.join(sorted(self))}"


@functools.lru_cache(maxsize=32)
def _installed_entry_points(group: str, path: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    from importlib.metadata import entry_points

    return tuple((ep.name, ep.value) for ep in entry_points(group=group))
