"""Reading an answer, or a gold, as a list of elements.

The ``list`` and ``set`` scorers and the explanation of their zeros both read
answers this way, so the reading lives apart from either. An answer can be a
JSON (or Python literal) list, maybe in prose and followed by a bracketed note,
or items one per line or separated by commas or semicolons. What follows the list
may be a note, never a candidate: a rest that hedges (``["a"] or maybe b``,
``["a"] [or maybe "b"]``) makes the answer unreadable. The bracket scan is
one pass over the text, and a list followed by many bracketed groups is refused
rather than parsed group by group, so a hostile answer cannot make reading slow.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from analyst_env.verifiers.normalize import HEDGING_NOTE

_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+(?=\S)")


MAX_NOTES = 4
"""Bracketed notes read after a list; more is not a note (and each costs a parse)."""


def _list_literal(chunk: str) -> list | tuple | None:
    """``chunk`` as a JSON (or Python literal) list, else ``None``."""
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return value if isinstance(value, (list, tuple)) else None
    return None


def _bracket_groups(text: str, start: int, quotes: bool = True) -> list[tuple[int, int]]:
    """``(start, end)`` of each top-level ``[...]`` from ``start`` on, in one pass.

    With ``quotes``, brackets inside quoted strings do not count (an unclosed
    quote ends the scan); the cost stays linear in the text.
    """
    groups: list[tuple[int, int]] = []
    depth, quote, opened = 0, "", 0
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif quotes and depth and c in "\"'":
            quote = c
        elif c == "[":
            opened = i if depth == 0 else opened
            depth += 1
        elif c == "]" and depth:
            depth -= 1
            if depth == 0:
                groups.append((opened, i + 1))
        i += 1
    return groups


def _list_before_note(text: str, start: int) -> list | tuple | None:
    """The first bracketed list when what follows it is a note, not another candidate.

    ``'["a", "b"] [note: sorted by count]'`` is the list ``["a", "b"]``. Refused
    (``None``): a second group that is itself a list (``["a"] ["b"]``: two
    answers), or a rest that hedges (``[or maybe "c"]``).
    """
    groups = _bracket_groups(text, start)
    if not groups:
        return None
    first = _list_literal(text[groups[0][0] : groups[0][1]])
    if first is None:
        return None
    end = groups[0][1]
    if HEDGING_NOTE.search(text, end):
        return None
    later = groups[1:] + _bracket_groups(text, end, quotes=False)
    if len(later) > 2 * MAX_NOTES:  # a note or two, not a string of candidates
        return None
    if any(_list_literal(text[a:b]) is not None for a, b in later):
        return None
    return first


def parse_collection(text: str) -> list[str] | None:
    """Read an answer as a list of element strings.

    Accepts a JSON (or Python literal) list, possibly embedded in prose, or
    items separated by newlines (bullets and ``1.`` numbering stripped), or by
    commas / semicolons.

    Returns:
        The elements as strings, or ``None`` if there are none.

    Example:
        >>> parse_collection('Top: ["North", "East"]')
        ['North', 'East']
        >>> parse_collection("1. North\\n2. East")
        ['North', 'East']
        >>> parse_collection("North; East"), parse_collection("1. Green Line")
        (['North', 'East'], ['Green Line'])
    """
    text = text.strip()
    if not text:
        return None
    start, end = text.find("["), text.rfind("]")
    if 0 <= start < end:
        value = _list_literal(text[start : end + 1])
        if value is not None and HEDGING_NOTE.search(text, end + 1):
            return None  # '["a", "b"] or maybe c': a candidate after the list, as in a note
        if value is None:  # '["a", "b"] [note: sorted by count]': the list, if the rest is a note
            value = _list_before_note(text, start)
        if value is not None:
            items = [v if isinstance(v, str) else json.dumps(v) for v in value]
            return [i for i in items if i.strip()] or None
    if "\n" in text:
        items = [_BULLET.sub("", line) for line in text.splitlines()]
    else:  # one line: "1. North" or "- North" is a list of one
        items = re.split(r"[;,]", _BULLET.sub("", text))
    items = [i.strip() for i in items if i.strip()]
    return items or None


def gold_items(gold: Any) -> list[Any] | None:
    """A gold's elements: a list as it is, a string read like an answer (``None``: none)."""
    if isinstance(gold, str):
        return parse_collection(gold)
    try:
        return list(gold)
    except TypeError:
        return None
