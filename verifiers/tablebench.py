"""TableBench's answer metrics: EM, EM within 10 %, ROUGE-L, and chart data for Visualization.

Upstream (``eval_tablebench_script.py``, ``metrics/qa_metrics.py``,
``metrics/custom_em_metric.py`` at the pinned commit) scores the text after
``Final Answer:``. Prediction and reference are first normalized by
``normalize_answer`` (lower-case, punctuation removed, articles removed,
whitespace collapsed), then: FactChecking and NumericalReasoning by EM,
DataAnalysis CorrelationAnalysis / TrendForecasting / StatisticalAnalysis by
EM with a 10 % margin, ImpactAnalysis by EM, other DataAnalysis by ROUGE-L (F1
of the longest common subsequence of tokens, as ``rouge_score`` tokenizes:
lower-case alphanumeric runs). This is kept exactly, including its quirk that
punctuation removal happens before the comma split and the number parsing, so
``"-3.24"`` is compared as ``"324"`` and ``"9.34, 1.18"`` as one item ``"934 118"``.

That is the ``official`` profile. The ``strict`` profile (the default) closes
the loopholes it opens: numbers keep their sign and decimal point (``3.24``
and ``324`` no longer match ``-3.24``), items are split on commas before
punctuation goes (thousands separators excepted), and an EM answer must have as
many items as the reference (upstream weighs reference items only, so
``spain, france, italy`` scored 1.0 against ``spain``).

Visualization (Pass@1 upstream: run the model's chart code, compare the plotted
y data with ``y_references`` rounded to 2 decimals) is scored on the data the
agent states: the answer must contain ``y_references = [[...], ...]`` (or a list
of lists) equal to the gold series after rounding to 2 decimals.

Example:
    >>> gold = {"answer": "spain, france", "metric": "EM"}
    >>> tablebench("Final Answer: Spain, France", gold).reward
    1.0
    >>> round(rouge_l("the cat sat on the mat", "a cat sat on a mat"), 3)
    0.667
"""

from __future__ import annotations

import ast
import re
import string
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from analyst_env.verifiers.normalize import join_space_groups
from analyst_env.verifiers.verdict import Verdict

METRICS = ("EM", "EM_with_error_10", "ROUGE-L", "Pass@1")


def metric_for(qtype: str, qsubtype: str) -> str:
    """The metric upstream uses for a question type.

    Example:
        >>> (
        ...     metric_for("DataAnalysis", "TrendForecasting"),
        ...     metric_for("DataAnalysis", "AnomalyDetection"),
        ... )
        ('EM_with_error_10', 'ROUGE-L')
    """
    if qtype == "Visualization":
        return "Pass@1"
    if qtype == "DataAnalysis":
        if qsubtype in ("CorrelationAnalysis", "TrendForecasting", "StatisticalAnalysis"):
            return "EM_with_error_10"
        return "EM" if qsubtype == "ImpactAnalysis" else "ROUGE-L"
    return "EM"


def normalize_answer(s: str) -> str:
    """Upstream ``normalize_answer``: lower, drop punctuation, drop articles, collapse spaces."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


_KEPT_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?%?|\d+(?:\.\d+)?%?")


def strict_normalize_answer(s: str) -> str:
    """``normalize_answer`` per comma-separated item, keeping each number whole (sign, decimals, %).

    Thousands groups (``1,200``, SI ``231 233.50``) are joined first.

    Example:
        >>> strict_normalize_answer("The -3.24, 1,200 and a B."), normalize_answer("-3.24")
        ('-3.24, 1200 and b', '324')
    """
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", join_space_groups(s.lower()))
    items = []
    for item in s.split(","):
        numbers: list[str] = []

        def keep(match: re.Match, numbers: list[str] = numbers) -> str:
            numbers.append(match.group(0))
            return f" \x00{len(numbers) - 1}\x00 "

        def put_back(match: re.Match, numbers: list[str] = numbers) -> str:
            return numbers[int(match.group(1))]

        item = _KEPT_NUMBER.sub(keep, item)
        item = "".join(ch for ch in item if ch not in string.punctuation)
        item = re.sub(r"\b(a|an|the)\b", " ", item)
        item = re.sub("\x00(\\d+)\x00", put_back, item)
        items.append(" ".join(item.split()))
    return ", ".join(items)


_FINAL_ANSWER = re.compile(r"Final Answer\s*:")
_ANY_CASE = re.compile(r"final answer\s*:", re.IGNORECASE)


def _markers(text: str) -> list[re.Match]:
    """The ``Final Answer:`` markers as upstream writes them (its regex is case-sensitive), or,
    when there is none, the marker in any case (``FINAL ANSWER:``)."""
    return list(_FINAL_ANSWER.finditer(text)) or list(_ANY_CASE.finditer(text))


def final_answer_text(text: str, whole_rest: bool = False) -> str:
    """The answer after the first ``Final Answer:``, as upstream reads it.

    Upstream (``parse_dp_prediction``) takes ``re.search(r"Final Answer: (.+)")``:
    the first marker, up to the end of its line, so an explanation on the next
    line is not part of the answer and a second ``Final Answer:`` is ignored. A
    marker alone on its line takes the next non-empty line. ``whole_rest`` keeps
    everything after the first marker (a chart's ``y_references`` may span
    lines). Without a marker, the whole text.

    Example:
        >>> final_answer_text("Reasoning...\\nFinal Answer: 42\\nBecause 6 * 7.")
        '42'
        >>> final_answer_text("Final Answer: 41\\nFinal Answer: 42")
        '41'
    """
    markers = _markers(text)
    if not markers:
        return text.strip()
    rest = text[markers[0].end() :].strip()
    return rest if whole_rest else rest.split("\n", 1)[0].strip()


def final_answers(text: str, whole_rest: bool = False) -> list[str]:
    """The answer line after every ``Final Answer:`` marker in any case, in order; a marker
    with nothing before the next one (``My final answer:`` then ``Final Answer: 42``) gives none.

    Example:
        >>> final_answers("Final Answer: 41\\nor rather\\nFinal Answer: 42")
        ['41', '42']
    """
    starts = [m.start() for m in _ANY_CASE.finditer(text)]
    ends = starts[1:] + [len(text)]
    found = (final_answer_text(text[a:b], whole_rest) for a, b in zip(starts, ends))
    return [answer for answer in found if answer]


_NUMBER = re.compile(r"^-?\d+(\.\d+)?%?$")


def _to_decimal(value: str) -> Decimal:
    if value.endswith("%"):
        return (Decimal(value.strip("%")) / Decimal(100)).quantize(
            Decimal("1.0000"), rounding=ROUND_HALF_UP
        )
    return Decimal(value)


def _precision(values: list[str]) -> int:
    places = [len(v.split(".")[-1]) if "." in v else 0 for v in values if not v.endswith("%")]
    return min(places) if places else 0


def _round(value: Decimal, places: int) -> str:
    return str(value.quantize(Decimal("1." + "0" * places), rounding=ROUND_HALF_UP))


def exact_match(reference: str, prediction: str, error_range: float | None = None) -> float:
    """Upstream ``compute_em`` / ``compute_em_with_tolerance`` for one (normalized) pair.

    Each comma-separated reference item is worth ``1/n``; numbers compare after
    rounding to the reference's decimals (or within ``error_range`` percent),
    other items exactly.

    Example:
        >>> exact_match("12, x", "12.0, x"), exact_match("100", "109", error_range=10)
        (1.0, 1.0)
    """
    refs = [x.strip() for x in reference.split(",")]
    preds = [x.strip() for x in prediction.split(",")]
    weight, score = 1.0 / len(refs), 0.0
    numeric_refs = [x for x in refs if _NUMBER.match(x) and not x.endswith("%")]
    for i, r in enumerate(refs):
        if i >= len(preds):
            continue
        p = preds[i]
        if not _NUMBER.match(r):
            score += weight * (r == p)
            continue
        try:
            if error_range is not None:
                vr, vp = _to_decimal(r), _to_decimal(p)
                ok = (
                    vp == vr
                    if vr == 0
                    else abs(vr - vp) / abs(vr) <= Decimal(str(error_range)) / 100
                )
            elif r.endswith("%"):
                ok = _to_decimal(r) == _to_decimal(p)
            else:
                places = _precision(numeric_refs)
                ok = _round(_to_decimal(r), places) == _round(_to_decimal(p), places)
        except (InvalidOperation, ValueError):
            ok = False
        score += weight * ok
    return score


def _rouge_tokens(text: str) -> list[str]:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).split()


def rouge_l(reference: str, prediction: str) -> float:
    """ROUGE-L F1 (``rouge_score`` tokenization, no stemming)."""
    ref, pred = _rouge_tokens(reference), _rouge_tokens(prediction)
    if not ref or not pred:
        return 0.0
    prev = [0] * (len(pred) + 1)
    for r in ref:
        cur = [0]
        for j, p in enumerate(pred, 1):
            cur.append(prev[j - 1] + 1 if r == p else max(prev[j], cur[j - 1]))
        prev = cur
    lcs = prev[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(pred), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def _series_text(text: str) -> str | None:
    """What ``y_references\\s*=\\s*(\\[.*\\])``, else ``(\\[\\s*\\[.*\\]\\s*\\])`` (DOTALL) would
    capture,
    found in linear time (the regexes retry from every bracket: quadratic on ``[[[[...``)."""
    last_close = text.rfind("]")
    named = re.search(r"y_references\s*=\s*\[", text)
    if named and last_close >= named.end() - 1:
        return text[named.end() - 1 : last_close + 1]
    closes = [m for m in re.finditer(r"\]\s*\]", text)]
    opening = re.search(r"\[\s*\[", text)
    if not closes or opening is None or closes[-1].start() < opening.end() - 1:
        return None
    return text[opening.start() : closes[-1].end()]


def parse_series(text: str) -> list[list[float]] | None:
    """The ``y_references`` list of lists in a text (rounded to 2 decimals), or ``None``.

    Example:
        >>> parse_series("y_references = [[1, 2.004], [3]]")
        [[1.0, 2.0], [3.0]]
    """
    chunk = _series_text(text)
    if chunk is None:
        return None
    try:
        value = ast.literal_eval(chunk)
        return [[round(float(y), 2) for y in series] for series in value]
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _hedges(submitted: str, metric: str) -> bool:
    """Whether the answer gives several ``Final Answer:`` lines that differ (``strict``).

    Upstream reads the first; reading any one of them still lets a policy offer
    two candidates and be paid when the one read is right, so ``strict`` pays
    nothing for an answer that changes its mind. Repeats of one answer are fine.
    """
    answers = final_answers(submitted, whole_rest=metric == "Pass@1")
    if len(answers) < 2:
        return False
    if metric == "Pass@1":
        return len({str(parse_series(a)) for a in answers}) > 1
    if metric == "ROUGE-L":
        return len({normalize_answer(a) for a in answers}) > 1
    first, *others = [strict_normalize_answer(a) for a in answers]
    return any(  # "42" and "42.0" are one answer; a different number of items is not
        len(a.split(",")) != len(first.split(","))
        or exact_match(first, a) < 1
        or exact_match(a, first) < 1
        for a in others
    )


def tablebench(submitted: str, gold: Any, profile: str = "strict") -> Verdict:
    """Score a TableBench answer with its question type's metric.

    Args:
        submitted: The answer text; only the line after the first ``Final Answer:`` counts
            (``strict``: several differing ``Final Answer:`` lines score 0).
        gold: ``{"answer": reference text, "metric": one of METRICS}``.
        profile: ``"strict"`` (default) or ``"official"``; see the module docstring.

    Raises:
        ValueError: If the metric is unknown.
    """
    metric, reference = gold["metric"], str(gold["answer"])
    if metric not in METRICS:
        raise ValueError(f"unknown TableBench metric {metric!r}; known: {', '.join(METRICS)}")
    if profile != "official" and _hedges(submitted, metric):
        return Verdict(0.0, {metric: 0.0}, "several different final answers (a hedge)")
    prediction = final_answer_text(submitted, whole_rest=metric == "Pass@1")
    if metric == "Pass@1":
        want, got = parse_series(reference), parse_series(prediction)
        ok = want is not None and got == want
        return Verdict(
            float(ok), {metric: float(ok)}, "series match" if ok else "series differ or missing"
        )
    strict = profile != "official" and metric != "ROUGE-L"
    normalize = strict_normalize_answer if strict else normalize_answer
    ref, pred = normalize(reference), normalize(prediction)
    if not pred.strip(", "):
        return Verdict(0.0, {metric: 0.0}, "empty answer")
    if metric == "ROUGE-L":
        value = rouge_l(ref, pred)
    elif strict and len(pred.split(",")) != len(ref.split(",")):
        value = 0.0
        return Verdict(
            value,
            {metric: value},
            f"{metric} 0.000: {len(pred.split(','))} items, not {len(ref.split(','))}",
        )
    else:
        value = exact_match(ref, pred, error_range=10 if metric == "EM_with_error_10" else None)
    return Verdict(value, {metric: value}, f"{metric} {value:.3f}")
