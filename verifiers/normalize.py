"""Text normalization and number parsing shared by the scorers.

Agents answer in free text ("The answer is $1,234.50."), while gold answers are
clean values. These helpers turn both sides into comparable forms, and never
raise on odd input: anything unparseable becomes ``None`` so the scorer can
award 0.

**The stated number** (:func:`parse_number`, used by the ``numeric`` scorer)
is the number a person reading the answer would take as the answer:

1. Digit groups separated by a space, a no-break or a thin space
   (``231 233.50``, SI style) are one number, as are ``,`` thousands groups
   (``1,234.50``); a unicode minus is a minus; ``$`` and ``%`` are allowed
   around the number.
2. An answer that is one number is that number.
3. Otherwise these asides are set aside first: dates and times
   (``2024-03-20``, ``03/20/2024``, ``14:30``), rounding notes (``rounded to 2
   decimal places``, ``2 d.p.``, ``to 3 significant figures``) and anything in
   parentheses (``251.14 (rounded)``), unless the only number is in parentheses.
   An aside that offers another number as a candidate (``251.14 (or 200)``,
   ``251.14 [maybe 200]``, ``251.14 (200?)``) is a hedge: no stated number.
4. If the numbers left differ, years beside the answer (four-digit integers
   1900-2100: ``251.14 for 2023``, ``2023: 251.14``) are set aside too, if a
   number remains; but not a year offered as a candidate, i.e. joined to a
   neighbouring number by a hedge word or by separators only (``Either 1963
   or 456``, ``1963, 456``).
5. If the numbers left all have the same value, that is the answer. If they
   differ and the answer hedges or lists them (``either``, ``or``, ``maybe``,
   ``between``, ``and``, ``/``, or two numbers with only separators between
   them: ``200, 251.14``, ``200-251``), there is no stated number and it scores
   0. Otherwise (``The total for 2023 is 251.14``) it is the last one.
"""

from __future__ import annotations

import math
import re

_QUOTES = "\"'`“”‘’"
_WS = re.compile(r"\s+")

# A number as written by people: optional sign or currency, thousands
# separators, decimals, exponent. Unicode minus is normalized first.
_NUMBER = re.compile(
    r"(?<![\w.])[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
)
_NUMBER_FULL = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def normalize_text(value: object) -> str:
    """Case-fold, trim, collapse whitespace, drop surrounding quotes and a trailing period.

    Args:
        value: Any value; non-strings are converted with ``str``.

    Returns:
        The normalized string.

    Example:
        >>> normalize_text('  "North   Region." ')
        'north region'
    """
    text = _WS.sub(" ", str(value)).strip()
    for _ in range(3):
        before = text
        text = text.rstrip(".").strip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1].strip()
        if text.startswith("**") and text.endswith("**") and len(text) >= 4:
            text = text[2:-2].strip()
        if text == before:
            break
    return text.casefold()


def _to_float(token: str) -> float | None:
    token = token.replace(",", "").replace("$", "")
    if token in {"", "+", "-", ".", "+.", "-."}:
        return None
    try:
        number = float(token)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


_GROUP_SPACE = "\u00a0\u202f\u2009 "
# Whole tokens only: "1 234 5678" or "12.5 000" are not digit groups.
_SPACE_GROUPED = re.compile(
    rf"(?<![\d.,])(?<!\d[{_GROUP_SPACE}])\d{{1,3}}(?:[{_GROUP_SPACE}]\d{{3}})+(?![\d]|[{_GROUP_SPACE}]\d|,\d)"
)


def join_space_groups(text: str) -> str:
    """Digit groups separated by spaces (SI style: ``231 233.50``, also no-break and thin
    spaces) written as one number; other spaces left alone.

    SI style, which ISO 80000 and many locales use, writes thousands apart with a
    space; without this rule ``231 233.50`` reads as two numbers, a hedge.

    Example:
        >>> join_space_groups("total 231 233.50 and 1\u202f000"), join_space_groups("1 23 456")
        ('total 231233.50 and 1000', '1 23 456')
    """
    return _SPACE_GROUPED.sub(lambda m: re.sub(f"[{_GROUP_SPACE}]", "", m.group(0)), text)


def _clean_numeric_text(text: str) -> str:
    text = join_space_groups(text.replace("\u2212", "-"))
    return re.sub(f"[{_GROUP_SPACE}]", " ", text)


_DATES_AND_TIMES = re.compile(  # one separator per date, whole tokens: "0.72/1507.72" is no date
    r"(?<![\d.])\d{4}([-/.])\d{1,2}\1\d{1,2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?!\.?\d)"
    r"|(?<![\d.])\d{1,2}([-/.])\d{1,2}\2\d{2,4}(?!\.?\d)"
    r"|\b\d{1,2}:\d{2}(?::\d{2})?\b"
)
_ROUNDING_NOTE = re.compile(
    r"(?:\b(?:rounded|correct|accurate|exact)\s+)?(?:\b(?:to|at)\s+)?\b\d+\s*"
    r"(?:decimal\s+places?|decimals?|d\.\s?p\.?|dp\b|significant\s+(?:figures?|digits?)|sig\.?\s*figs?\b|s\.f\.)",
    re.I,
)
_PARENTHETICAL = re.compile(r"\([^()]{0,500}\)|\[[^\[\]]{0,500}\]")
_HEDGE = re.compile(
    r"\b(?:or|either|maybe|perhaps|possibly|probably|between|and|vs|versus)\b|/|\?", re.I
)
_ONLY_SEPARATORS = re.compile(r"^[\s,;:&~\-\u2013\u2014|]*$")
_HEDGE_WORDS = r"\b(?:or|either|maybe|perhaps|possibly|alternatively|instead|otherwise)\b|\?"
HEDGING_NOTE = re.compile(_HEDGE_WORDS + "|/", re.I)
"""A note beside an answer that offers another candidate (``(or 13)``, ``[maybe "c"]``,
``(13?)``): the words of a hedge without ``and`` and ``between``, which a note
that only describes the answer (``(between 2022 and 2023)``) may use."""
HEDGING_WORD = re.compile(_HEDGE_WORDS, re.I)
"""``HEDGING_NOTE`` without the slash, for notes about numbers: there a slash is a unit or a
period (``12 (km/h)``, ``(FY 2023/24)``), and two numbers joined by one are two numbers stated,
which every number scorer already reads as no answer or counts."""


def _is_year(token: str) -> bool:
    return len(token) == 4 and token.isdigit() and 1900 <= int(token) <= 2100


def _is_aside_year(
    text: str, numbers: list[tuple[int, int, float]], n: tuple[int, int, float]
) -> bool:
    """Whether ``n`` is a year set aside (rule 4), not a candidate offered beside another number."""
    if not _is_year(text[n[0] : n[1]]):
        return False
    i = numbers.index(n)
    for j in (i - 1, i + 1):
        if not 0 <= j < len(numbers) or _is_year(text[numbers[j][0] : numbers[j][1]]):
            continue
        first, second = sorted((n, numbers[j]))
        gap = text[first[1] : second[0]]
        if _HEDGE.search(gap) or (_ONLY_SEPARATORS.match(gap) and ":" not in gap):
            return False
    return True


def _numbers(text: str) -> list[tuple[int, int, float]]:
    """``(start, end, value)`` of every finite number written in ``text``."""
    text = re.sub(r"-\s*\$", "$-", text)  # "-$5" and "$-5" both mean minus five
    found = []
    for m in _NUMBER.finditer(text):
        token = m.group(0)
        if not any(c.isdigit() for c in token):
            continue
        value = _to_float(token.replace("$-", "-").replace("$+", "+"))
        if value is not None:
            found.append((m.start(), m.end(), value))
    return found


def _hedging_aside(text: str, stated: set[float]) -> bool:
    """Whether a parenthetical aside offers a number other than the ``stated`` ones as another
    candidate (``12 (or 13)``, ``12 [maybe 13]``, ``12 (13?)``): not an aside but a hedge."""
    return any(
        HEDGING_WORD.search(aside.group(0)) and {v for _, _, v in _numbers(aside.group(0))} - stated
        for aside in _PARENTHETICAL.finditer(text)
    )


def parse_number(text: object) -> float | None:
    """The number an answer text states, by the rule in the module docstring.

    Args:
        text: The submitted answer (any value; non-strings are converted).

    Returns:
        The stated number, or ``None`` if the text holds no finite number or
        states several different ones.

    Example:
        >>> parse_number("The answer is $1,234.50.")
        1234.5
        >>> parse_number("about 12.5%")
        12.5
        >>> (
        ...     parse_number("251.14 (rounded to 2 decimal places)"),
        ...     parse_number("251.14 on 2024-03-20"),
        ... )
        (251.14, 251.14)
        >>> parse_number("231\u202f233.50"), parse_number("In 2023 the total was 251.14")
        (231233.5, 251.14)
        >>> parse_number("Either 200.00 or 251.14") is None, parse_number("no idea") is None
        (True, True)
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text) if math.isfinite(float(text)) else None
    cleaned = _clean_numeric_text(str(text)).strip().replace("**", " ")
    exact = as_number(cleaned)
    if exact is not None:
        return exact
    plain = _ROUNDING_NOTE.sub(" ", _DATES_AND_TIMES.sub(" ", cleaned))
    outside = _PARENTHETICAL.sub(" ", plain)
    numbers = _numbers(outside)
    if not numbers:
        numbers = _numbers(plain)
        outside = plain
    if not numbers:
        return None
    if _hedging_aside(plain, {value for _, _, value in numbers}):
        return None
    if len({value for _, _, value in numbers}) > 1:
        not_years = [n for n in numbers if not _is_aside_year(outside, numbers, n)]
        numbers = not_years or numbers
    if len({value for _, _, value in numbers}) == 1:
        return numbers[0][2]
    between = [outside[a[1] : b[0]] for a, b in zip(numbers, numbers[1:])]
    if _HEDGE.search(outside) or any(_ONLY_SEPARATORS.match(gap) for gap in between):
        return None
    return numbers[-1][2]


def as_number(text: object) -> float | None:
    """Parse ``text`` as a number only if the whole (trimmed) text is one number.

    Unlike :func:`parse_number` this does not hunt inside sentences, so that
    "2023-01" or "North 2" are not treated as numbers when comparing elements.

    Example:
        >>> as_number(" 1,200 ")
        1200.0
        >>> as_number("12%")
        12.0
        >>> as_number("North 2") is None
        True
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text) if math.isfinite(float(text)) else None
    token = _clean_numeric_text(str(text)).strip().strip(_QUOTES).strip()
    token = token.rstrip("%").strip()
    if token.startswith("$"):
        token = token[1:]
    elif token[:2] in {"-$", "+$"}:
        token = token[0] + token[2:]
    if not token or not _NUMBER_FULL.fullmatch(token):
        return None
    return _to_float(token)


def close(a: float, b: float, rel_tol: float = 0.0, abs_tol: float = 1e-6) -> bool:
    """Whether two numbers agree within a relative or absolute tolerance.

    Example:
        >>> close(0.1 + 0.2, 0.3)
        True
        >>> close(100.0, 101.0, rel_tol=0.02)
        True
    """
    return math.isclose(a, b, rel_tol=rel_tol, abs_tol=abs_tol)
