"""Text normalization and number parsing shared by the scorers.

Agents answer in free text ("The answer is $1,234.50."), while gold answers are
clean values. These helpers turn both sides into comparable forms, and never
raise on odd input: anything unparseable becomes ``None`` so the scorer can
award 0.
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


def _clean_numeric_text(text: str) -> str:
    return text.replace("\u2212", "-").replace("\u00a0", " ").replace("\u202f", " ")


def parse_number(text: object) -> float | None:
    """The number an answer text states: the last number written in it.

    Tolerates thousands separators, ``$``, ``%`` and surrounding words.

    Args:
        text: The submitted answer (any value; non-strings are converted).

    Returns:
        The parsed number, or ``None`` if the text holds no finite number.

    Example:
        >>> parse_number("The answer is $1,234.50.")
        1234.5
        >>> parse_number("about 12.5%")
        12.5
        >>> parse_number("no idea") is None
        True
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text) if math.isfinite(float(text)) else None
    cleaned = _clean_numeric_text(str(text)).strip()
    exact = as_number(cleaned)
    if exact is not None:
        return exact
    # "-$5" and "$-5" both mean minus five.
    cleaned = re.sub(r"-\s*\$", "$-", cleaned)
    numbers = [m.group(0) for m in _NUMBER.finditer(cleaned) if any(c.isdigit() for c in m.group(0))]
    for token in reversed(numbers):
        value = _to_float(token.replace("$-", "-").replace("$+", "+"))
        if value is not None:
            return value
    return None


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
