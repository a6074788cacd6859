"""DA-Code's output checks: ``compare_csv`` on files the agent writes, ``compare_text`` on a JSON
answer.

Follows upstream ``da_agent/evaluators/metrics`` (``table.py``, ``text.py``) as
the benchmark README states it:

* ``dacode_csv``: every gold column (or only ``condition_cols``) is a value
  vector that must equal some column of the agent's CSV: same length, both NaN,
  numbers within absolute 1e-2, strings equal ignoring case, other values equal;
  ``ignore_order`` sorts both vectors first. ``score_rule`` ``divide`` (default)
  scores the fraction of matched gold columns, ``all`` is all-or-nothing. With
  several gold files for one output the best one counts; several outputs average.
* ``dacode_text``: the span from the first ``{`` to the last ``}`` is parsed as
  JSON5 as upstream's ``json5.loads`` reads it (comments, trailing commas, single
  quotes), with ``pyjson5``: the same grammar compiled, so a 64 KiB answer parses in
  about a millisecond where the pure-Python ``json5`` takes seconds; and
  matched key by key with the gold dict (keys compared lower-cased and
  stripped; a one-element list equals its element; the value is cast to the
  gold's type (``strict``: only a cast that keeps the value, where upstream's
  ``int(12.9)`` is 12 and ``bool("no")`` is True); floats within 1e-2, ints
  exact, strings ignoring case and outer spaces, lists element-wise and
  all-or-nothing, ``ignore_order`` sorting them);
  ``score_rule`` ``all`` (default) or ``divide``.

Example:
    >>> dacode_text('{"Highest Country": ["monaco"]}', {"highest country": ["Monaco"]}).reward
    1.0
    >>> (
    ...     dacode_text('{"n": 3.02}', {"n": 3.0}).reward,
    ...     dacode_text('{"n": 3.005}', {"n": 3.0}).reward,
    ... )
    (0.0, 1.0)
"""

from __future__ import annotations

import ast
import io
import json
import math
from typing import Any

import pandas as pd
import pyjson5

from analyst_env.verifiers.verdict import Verdict, VerifyContext

TOLERANCE = 1e-2


def _sort_key(x: Any) -> tuple:
    return (x is None, str(x), isinstance(x, (int, float)))


def _is_na(x: Any) -> bool:
    try:
        return bool(pd.isna(x))
    except (TypeError, ValueError):
        return False


def vectors_match(
    gold: list[Any], pred: list[Any], ignore_order: bool = False, tol: float = TOLERANCE
) -> bool:
    """Upstream ``vectors_match`` with case-insensitive strings.

    Example:
        >>> vectors_match([1.0, "Road"], [1.004, "road"]), vectors_match([1.0], [1.02])
        (True, False)
    """
    if ignore_order:
        gold, pred = sorted(gold, key=_sort_key), sorted(pred, key=_sort_key)
    if len(gold) != len(pred):
        return False
    for a, b in zip(gold, pred):
        if _is_na(a) and _is_na(b):
            continue
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            if not math.isclose(float(a), float(b), abs_tol=tol):
                return False
        elif isinstance(a, str) and isinstance(b, str):
            if a.lower() != b.lower():
                return False
        elif a != b:
            return False
    return True


def csv_score(
    pred: pd.DataFrame,
    gold: pd.DataFrame,
    condition_cols: list[int] | None = None,
    score_rule: str = "divide",
    ignore_order: bool = False,
    extra_columns: bool = True,
) -> float:
    """Fraction (``divide``) or all-or-nothing (``all``) of gold columns found among the predicted
    ones.

    With ``extra_columns=False`` (the ``strict`` profile) a prediction with more
    columns than the gold file scores 0: upstream only looks for each gold
    column somewhere in the prediction, so a CSV of many candidate columns
    would find them all.

    Raises:
        ValueError: If ``score_rule`` is neither ``divide`` nor ``all``, or a
            condition column is out of range.
    """
    if score_rule not in ("divide", "all"):
        raise ValueError(f"unknown DA-Code score_rule {score_rule!r}; expected 'divide' or 'all'")
    if not extra_columns and pred.shape[1] > gold.shape[1]:
        return 0.0
    if condition_cols:
        if max(condition_cols) >= gold.shape[1]:
            raise ValueError(
                f"condition_cols {condition_cols} out of range for {gold.shape[1]} gold columns"
            )
        gold = gold.iloc[:, list(condition_cols)]
    gold_cols = gold.transpose().values.tolist()
    pred_cols = pred.transpose().values.tolist()
    if not gold_cols:
        return 0.0
    matched = sum(any(vectors_match(g, p, ignore_order) for p in pred_cols) for g in gold_cols)
    if score_rule == "all":
        return float(matched == len(gold_cols))
    return matched / len(gold_cols)


def dacode_csv(
    submitted: str, gold: Any, *, context: VerifyContext, profile: str = "strict"
) -> Verdict:
    """Score the CSV files the agent wrote against the gold files (the answer text is ignored).

    Args:
        submitted: The final answer (ignored).
        gold: ``{"outputs": [{"file": name the agent writes, "gold": [host csv paths],
            "options": {"condition_cols", "score_rule", "ignore_order"}}]}``.
        context: Gives ``read_file`` for the episode's files.
        profile: ``"strict"`` (default: no columns beyond the gold's) or ``"official"``.
    """
    outputs = gold["outputs"]
    components, notes = {}, []
    for out in outputs:
        name, opts = out["file"], out.get("options") or {}
        try:
            raw = context.read_file(name) if context.read_file else None
            if raw is None:
                raise FileNotFoundError(name)
            pred = pd.read_csv(io.BytesIO(raw), low_memory=False)
        except FileNotFoundError:
            components[f"file:{name}"] = 0.0
            notes.append(f"{name} not written")
            continue
        except OSError as exc:  # refused by the reader: a symbolic link, a directory, too large
            components[f"file:{name}"] = 0.0
            notes.append(f"{name} not read: {exc}")
            continue
        except (
            pd.errors.ParserError,
            pd.errors.EmptyDataError,
            UnicodeDecodeError,
            ValueError,
        ) as exc:
            components[f"file:{name}"] = 0.0
            notes.append(f"{name} unreadable: {type(exc).__name__}")
            continue
        best = max(
            csv_score(
                pred,
                pd.read_csv(path, low_memory=False),
                condition_cols=opts.get("condition_cols"),
                score_rule=opts.get("score_rule", "divide"),
                ignore_order=bool(opts.get("ignore_order", False)),
                extra_columns=profile == "official",
            )
            for path in out["gold"]
        )
        components[f"file:{name}"] = best
        notes.append(f"{name}: {best:g}")
    reward = sum(components.values()) / len(components) if components else 0.0
    return Verdict(reward, components, "; ".join(notes))


def answer_json(text: str) -> Any:
    """The first ``{...}`` span of the answer as JSON, a Python literal or JSON5, else ``None``.

    Example:
        >>> answer_json('Result: {"a": [1]} done')
        {'a': [1]}
        >>> answer_json("no json") is None
        True
    """
    # Upstream's re.search(r"\{.*\}", DOTALL): from the first "{" to the last "}". Found
    # directly, since the regex retries from every "{" and is quadratic on "{{{{...".
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    chunk = text[start : end + 1]
    for loader in (json.loads, ast.literal_eval, pyjson5.loads):
        try:
            value = loader(chunk)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        except pyjson5.Json5Exception:  # not a ValueError: the compiled parser's own family
            continue
        return value if isinstance(value, dict) else None
    return None


def _value_score(gold: Any, got: Any, ignore_order: bool) -> float:
    if type(gold) is not type(got):
        return 0.0
    if isinstance(gold, float):
        return float(abs(gold - got) <= TOLERANCE)
    if isinstance(gold, str):
        return float(gold.lower().strip() == got.lower().strip())
    if isinstance(gold, list):
        if len(gold) != len(got) or not gold:
            return 0.0
        if ignore_order:
            gold, got = sorted(gold, key=_sort_key), sorted(got, key=_sort_key)
        return float(all(_value_score(a, b, ignore_order) for a, b in zip(gold, got)))
    if isinstance(gold, dict):
        if gold.keys() != got.keys():
            return 0.0
        return float(all(_value_score(v, got[k], ignore_order) for k, v in gold.items()))
    return float(gold == got)


def _unwrap(value: Any) -> Any:
    return value[0] if isinstance(value, list) and len(value) == 1 else value


_TRUTH = {"true": True, "false": False}


def _cast(kind: type, value: Any, lossless: bool) -> Any:
    """``kind(value)``, upstream's cast to the gold's type. ``lossless`` (the ``strict``
    profile) refuses (``ValueError``) a cast that changes what the answer says: a fraction
    cut to an int (``int(12.9)`` is 12), a number or a text read as a truth value (``bool("no")``
    is True), a truth value read as a number. Under it the text ``"true"`` or ``"false"`` (any
    case) is that truth value: it says so, and upstream's ``bool("false")`` is True."""
    if lossless and kind is bool and isinstance(value, str) and value.strip().lower() in _TRUTH:
        return _TRUTH[value.strip().lower()]
    if lossless and (
        (kind is bool) != isinstance(value, bool)
        or (kind is int and isinstance(value, float) and not float(value).is_integer())
    ):
        raise ValueError(f"{value!r} is not a {kind.__name__} without changing it")
    return kind(value)


def text_score(
    gold: dict[str, Any],
    got: dict[str, Any],
    score_rule: str = "all",
    ignore_order: bool = False,
    lossless: bool = True,
) -> dict[str, float]:
    """Per-key scores of an answer dict against the gold dict (upstream ``text_score``); with
    ``lossless``, only casts to the gold's type that keep the value (:func:`_cast`)."""
    got_keys = {str(k).lower().strip(): v for k, v in got.items()}
    scores = {}
    for key, want in gold.items():
        norm = str(key).lower().strip()
        if norm not in got_keys:
            scores[key] = 0.0
            continue
        have = got_keys[norm]
        w, h = _unwrap(want), _unwrap(have)
        if type(w) is type(h):
            want, have = w, h
        elif isinstance(want, list) and not isinstance(have, list):
            have = [have]
        elif not isinstance(want, list) and isinstance(have, list):
            want = [want]
        try:
            have = _cast(type(want), have, lossless)
        except (TypeError, ValueError, OverflowError):
            scores[key] = 0.0
            continue
        scores[key] = _value_score(want, have, ignore_order)
    return scores


def dacode_text(
    submitted: str,
    gold: Any,
    score_rule: str = "all",
    ignore_order: bool = False,
    profile: str = "strict",
) -> Verdict:
    """Score a JSON answer against the gold dict (or any of several gold dicts).

    Args:
        submitted: The answer text containing a JSON object.
        gold: The gold dict, or a list of accepted gold dicts.
        score_rule: ``all`` (every key right) or ``divide`` (fraction of keys).
        ignore_order: Compare lists as multisets.
        profile: ``"strict"`` (default: a value cast to the gold's type must keep its value,
            so ``12.9`` is no int 12 and ``"no"`` no True) or ``"official"`` (upstream's cast).
    """
    if score_rule not in ("all", "divide", "devide"):
        raise ValueError(f"unknown DA-Code score_rule {score_rule!r}; expected 'all' or 'divide'")
    golds = gold if isinstance(gold, list) else [gold]
    got = answer_json(submitted)
    if got is None:
        return Verdict(0.0, detail="no JSON object in the answer")
    best, best_parts = -1.0, {}
    for g in golds:
        parts = text_score(g, got, score_rule, ignore_order, lossless=profile != "official")
        value = (
            float(all(parts.values()))
            if score_rule == "all"
            else sum(parts.values()) / max(len(parts), 1)
        )
        if value > best:
            best, best_parts = value, parts
    return Verdict(
        best,
        {f"key:{k}": v for k, v in best_parts.items()},
        f"{sum(best_parts.values()):g}/{len(best_parts)} keys right",
    )
