"""Articles and plurals for generated questions, from ``inflect`` rather than string rules.

Hand-made rules got English wrong ("staies", "plaies", "a `agent_id`"); inflect
knows the exceptions (vowel-sounding consonants, "an hour", "a unit", irregular
plurals). Two things it cannot know are handled here:

- A column name is an identifier in backticks; the article goes with how it is
  read, so inflect is given the reading (``agent_id`` read as "agent id": "an"),
  and the text keeps the identifier as it is.
- A noun phrase is pluralised on its head, the last word ("grade record" →
  "grade records"); a phrase inflect reads as plural already is left as it is,
  so pluralising twice never makes "recordss".

The vocabulary is small (domain entities and column names), so every answer is
cached per phrase and generation pays inflect's cost once per phrase and process.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

_import_lock = threading.Lock()


def _unchecked(target: Any = None, **_options: Any) -> Any:
    """``typeguard.typechecked`` as it is under ``python -O``: the function itself."""
    return target if target is not None else (lambda f: f)


@functools.cache
def engine() -> Any:
    """inflect's engine, imported on first use and without typeguard's instrumentation.

    inflect 7 wraps its methods in ``typeguard.typechecked``, which re-parses and
    recompiles the whole module once per method at import: about 3 s of CPU, more
    than the rest of the generator's imports together (jaraco/inflect#212). The
    checks only guard against wrong argument types, which typeguard itself skips
    under ``python -O``; here the decorator is the identity while inflect is first
    imported (0.05 s), and is put back at once. The lock keeps two first calls from
    restoring each other's patch; a module of another thread decorated in that instant
    would go unchecked, as under ``-O`` (none of this project's dependencies uses typeguard).
    """
    with _import_lock:
        try:
            import typeguard
        except ImportError:  # an inflect that does not use typeguard
            import inflect

            return inflect.engine()
        real = typeguard.typechecked
        typeguard.typechecked = _unchecked
        try:
            import inflect
        finally:
            typeguard.typechecked = real
        return inflect.engine()


def reading(phrase: str) -> str:
    """How a phrase is read aloud: backticks dropped, an identifier's underscores as spaces.

    >>> reading("`agent_id`")
    'agent id'
    """
    return re.sub(r"[_`]+", " ", phrase).strip()


@functools.lru_cache(maxsize=4096)
def article(phrase: str, capital: bool = False) -> str:
    """``phrase`` after its indefinite article, chosen by how the phrase is read.

    >>> article("`agent_id`"), article("order"), article("`kwh`", capital=True)
    ('an `agent_id`', 'an order', 'A `kwh`')
    """
    word = engine().a(reading(phrase)).split(" ", 1)[0]
    return f"{word.capitalize() if capital else word} {phrase}"


@functools.lru_cache(maxsize=4096)
def is_plural(phrase: str) -> bool:
    """Whether inflect reads the phrase's last word as a plural (of a singular it knows).

    >>> is_plural("stays"), is_plural("stay"), is_plural("grade records")
    (True, False, True)
    """
    head = phrase.rsplit(" ", 1)[-1]
    singular = engine().singular_noun(head)
    return bool(singular) and engine().plural_noun(singular) == head


@functools.lru_cache(maxsize=4096)
def plural(phrase: str) -> str:
    """The plural of a noun phrase: its last word pluralised; a plural phrase as it is.

    >>> plural("stay"), plural("play"), plural("entry"), plural("batch"), plural("meter read")
    ('stays', 'plays', 'entries', 'batches', 'meter reads')
    >>> plural("stays")
    'stays'
    """
    if is_plural(phrase):
        return phrase
    first, _, head = phrase.rpartition(" ")
    return f"{first} {engine().plural_noun(head)}" if first else engine().plural_noun(head)
