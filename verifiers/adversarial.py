"""Answers a policy might try instead of solving a task, and correct answers in natural forms.

A policy under training tries every answer that might earn reward without the
work: saying nothing, "all of them", hedges that name the gold among other
candidates, supersets, NaN, a copy of the input. This module builds such
answers *from each task's own gold*, so they are aimed at the real scorer on
the real task, together with the natural correct forms the scorer documents
(thousand separators, prose around the number, another order where order does
not matter...). ``analyst-env validate`` probes every task with them and the
reward-hacking tests use the same generators: one list, two users.

Every probe is cheap: a short text (no multi-kilobyte shapes; those are the
cost-bound tests' job), and for file-scored tasks only files a scorer refuses
before opening them with LibreOffice. Scoring runs in-process with
:func:`~analyst_env.verifiers.scorers.judge`.

Example:
    >>> from analyst_env.task_format import Task, VerifierSpec
    >>> task = Task(id="t", instruction="Total?", answer=42.5, oracle_answer="42.5",
    ...             verifier=VerifierSpec(name="numeric"))
    >>> result = probe_task(task)
    >>> result.adversarial_tried > 10 and result.adversarial_nonzero == []
    True
    >>> result.natural_failed
    []
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from analyst_env.task_format import Task
from analyst_env.verifiers.normalize import as_number, parse_number
from analyst_env.verifiers.scorers import judge
from analyst_env.verifiers.verdict import VerifyContext
from analyst_env.verifiers.workbook_match import MAX_UNPACKED_BYTES

JUNK = [
    "",
    " ",
    "all of them",
    "none",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "{}",
    "[]",
    "null",
    "I don't know",
    "the answer",
    "?",
]
"""Answers that say nothing; no scorer may reward them."""

PROBED = (
    "dabench",
    "dacode_csv",
    "dacode_text",
    "exact",
    "list",
    "numeric",
    "set",
    "sql_execution",
    "tablebench",
    "workbook_match",
)
"""The scorers this module knows the answers of. Others (``llm_judge``, which needs its
service, and scorers a project registers itself) are reported as not probed."""

NOTES = {"dacode_csv": "answer text only (the output files are scored by the null run)"}


@dataclass(frozen=True)
class Probe:
    """One answer to try: its text and, for file-scored tasks, the episode's files."""

    label: str
    answer: str
    files: dict[str, bytes] | None = None


@dataclass
class ProbeResult:
    """What probing one task found."""

    scorer: str
    adversarial_tried: int = 0
    adversarial_nonzero: list[str] = field(default_factory=list)
    natural_tried: int = 0
    natural_failed: list[str] = field(default_factory=list)
    probed: bool = True
    note: str | None = None


# ── numbers ──
def _wrong_number(gold: float) -> float:
    """A number no tolerance accepts for ``gold``, written plainly."""
    return round(gold + max(1000.0, abs(gold)) * 1.5 + 7, 2)


def _grouped(text: str, sep: str) -> str | None:
    """``text`` (a plain decimal) with its integer part in thousands groups, or None if short."""
    match = re.fullmatch(r"(-?)(\d+)(\.\d+)?", text)
    if not match or len(match.group(2)) < 4:
        return None
    digits = match.group(2)
    head = len(digits) % 3 or 3
    groups = [digits[:head]] + [digits[i : i + 3] for i in range(head, len(digits), 3)]
    return match.group(1) + sep.join(groups) + (match.group(3) or "")


def _same_number(text: str, gold: float) -> bool:
    try:
        return float(text) == gold
    except ValueError:
        return False


def numeric_probes(gold_text: str, gold: float) -> tuple[list[Probe], list[Probe]]:
    """(adversarial, natural) answers for a number task whose oracle says ``gold_text``."""
    w = f"{_wrong_number(gold):.2f}".rstrip("0").rstrip(".")
    adversarial = [
        Probe("either-or", f"Either {w} or {gold_text}"),
        Probe("or", f"{gold_text} or {w}"),
        Probe("pair", f"{w}, {gold_text}"),
        Probe("list", f"[{w}, {gold_text}, {w}1]"),
        Probe("range", f"{w} - {gold_text}"),
        Probe("between", f"Between {w} and {gold_text}"),
        Probe("maybe", f"maybe {gold_text}, maybe {w}"),
        Probe("slash", f"{gold_text}/{w}"),
        Probe("wrong", w),
        Probe("digits-run-together", gold_text.replace(".", "")),
    ]
    run_together = gold_text.replace(".", "")
    if "." not in gold_text or _same_number(run_together, gold):
        adversarial.pop()  # no decimal point to drop, or dropping it keeps the value ("0.0")
    natural = [
        Probe("plain", gold_text),
        Probe("sentence", f"The answer is {gold_text}."),
        Probe("bold", f"**{gold_text}**"),
        Probe("rounding-note", f"{gold_text} (rounded)"),
        Probe("date-beside", f"{gold_text} on 2022-12-31"),
        Probe("trailing-zero", gold_text + ("0" if "." in gold_text else ".0")),
    ]
    for label, sep in (
        ("commas", ","),
        ("space", " "),
        ("thin-space", "\u202f"),
        ("no-break-space", "\u00a0"),
    ):
        grouped = _grouped(gold_text, sep)
        if grouped:
            natural.append(Probe(label, grouped))
    return adversarial, natural


# ── text, sets, lists ──
def text_probes(gold: str) -> tuple[list[Probe], list[Probe]]:
    other = "Unknown" if gold.lower() != "unknown" else "Other"
    adversarial = [
        Probe("or", f"{gold} or {other}"),
        Probe("pair", f"{gold}, {other}"),
        Probe("wrong", other),
    ]
    if len(gold) >= 4:
        adversarial.append(Probe("prefix", gold[: len(gold) // 2]))
    natural = [
        Probe("quoted", f"'{gold}'."),
        Probe("bold", f"**{gold}**"),
        Probe("period", f"{gold}."),
        Probe("case", gold.upper()),
    ]
    return adversarial, natural


def collection_probes(items: list[str], ordered: bool) -> tuple[list[Probe], list[Probe]]:
    quoted = ", ".join(f'"{i}"' for i in items)
    adversarial = [
        Probe("superset", f'[{quoted}, "Other"]'),
        Probe("nested", f"[[{quoted}]]"),
        Probe("second-list", f'[{quoted}] ["Other"]'),
    ]
    if len(items) > 1:  # one item joined by spaces is that item, the correct answer
        adversarial.append(Probe("space-joined", " ".join(items)))
        adversarial.append(Probe("subset", "[" + ", ".join(f'"{i}"' for i in items[:-1]) + "]"))
        if ordered and items[::-1] != items:
            adversarial.append(
                Probe("reversed", "[" + ", ".join(f'"{i}"' for i in items[::-1]) + "]")
            )
    natural = [
        Probe("json", f"[{quoted}]"),
        Probe("lowercase", ", ".join(i.lower() for i in items)),
        Probe("numbered", "\n".join(f"{n}. {i}" for n, i in enumerate(items, 1))),
        Probe("in-prose", f"They are [{quoted}]."),
        Probe("with-note", f"[{quoted}] [note: as the question asks]"),
    ]
    if not ordered:
        natural.append(Probe("other-order", ", ".join(items[::-1])))
        natural.append(Probe("repeated", f'[{quoted}, "{items[0]}"]'))
    return adversarial, natural


def is_nan_text(value: Any) -> bool:
    """Whether a gold value is NaN (written ``nan``, ``NaN``...): then ``nan`` is its right answer.

    Example:
        >>> is_nan_text("NaN"), is_nan_text("0.5"), is_nan_text("n/a")
        (True, False, False)
    """
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return False


def dabench_probes(parts: list[list[str]], oracle: str) -> tuple[list[Probe], list[Probe]]:
    wrong = " ".join(f"@{n}[-12345.678]" for n, _ in parts)
    adversarial = [
        Probe("wrong-then-right", f"{wrong} {oracle}"),
        Probe("right-then-wrong", f"{oracle} {wrong}"),
        Probe("no-format", " ".join(f"{n} {v}" for n, v in parts)),
    ]
    if not all(is_nan_text(v) for _, v in parts):  # NaN for a number; a NaN gold keeps its value
        nan = " ".join(f"@{n}[{v if is_nan_text(v) else 'nan'}]" for n, v in parts)
        adversarial.append(Probe("nan", nan))
    if len(parts) > 1:
        adversarial.append(Probe("missing-part", " ".join(oracle.split()[:-1])))
    natural = [
        Probe("plain", oracle),
        Probe("in-prose", f"Results: {oracle}."),
        Probe("agreeing-repeat", f"{oracle} {oracle}"),
    ]
    return adversarial, natural


# ── files ──
def _unpacks_huge() -> bytes:
    """A small zip that unpacks to more than any scorer opens (refused before opening)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr("xl/worksheets/sheet1.xml", b"0" * (MAX_UNPACKED_BYTES + 1))
    return out.getvalue()


_HUGE: list[bytes] = []


def workbook_probes(name: str, task_files: dict[str, str]) -> list[Probe]:
    if not _HUGE:
        _HUGE.append(_unpacks_huge())
    probes = [
        Probe("no-file", "done", {}),
        Probe("not-a-zip", "done", {name: b"PK\x03\x04 not a zip"}),
        Probe("zip-bomb", "done", {name: _HUGE[0]}),
    ]
    for other, path in sorted(task_files.items()):
        if not other.endswith((".xlsx", ".xlsm")):
            with open(path, "rb") as fh:
                probes.append(Probe("another-file-renamed", "done", {name: fh.read(65536)}))
            break
    return probes


# ── per task ──
def _sql_values(task: Task) -> tuple[list[Probe], list[Probe], set[str]]:
    """SQL probes from the gold query's own result, and the junk that result makes correct."""
    from analyst_env.verifiers.sql_execution import SqlRunError, database_path, run_readonly

    path = database_path(VerifyContext(task_files=dict(task.files)), task.verifier.params.get("db"))
    try:
        rows = [list(r) for r in run_readonly(path, task.answer, max_rows=50)] if path else None
    except SqlRunError:
        rows = None
    if rows is None:
        return [Probe("trailing", "SELECT 'zz-probe'")], [], set()
    width = len(rows[0]) if rows else 1
    marker = ", ".join(["'zz-probe'"] * width)
    adversarial = [
        Probe("trailing", f"SELECT {marker}"),
        Probe("gold-union", f"{task.answer.rstrip().rstrip(';')} UNION ALL SELECT {marker}"),
        Probe("superset-rows", repr(rows + [["zz-probe"] * width])),
    ]
    if len(rows) > 1:
        adversarial.append(Probe("subset-rows", repr(rows[:-1])))
    natural = [Probe("gold-sql", task.answer), Probe("values-literal", repr(rows))]
    nullish = {"none", "null", "nan", ""}
    empty = all(v is None or str(v).strip().lower() in nullish for row in rows for v in row)
    return adversarial, natural, ({"[]", "{}", *nullish} if empty else set())


def _rouge_safe(junk: list[Probe], gold_text: str) -> list[Probe]:
    """ROUGE-L gives credit per shared word: keep only junk sharing no word with the gold."""
    words = set(re.findall(r"\w+", gold_text.lower()))
    return [p for p in junk if not set(re.findall(r"\w+", p.answer.lower())) & words]


def _json5_form(oracle: str) -> str | None:
    """The oracle's JSON object written as JSON5 (a comment and a trailing comma),
    as DA-Code's upstream scorer reads it; ``None`` when the oracle is no JSON object."""
    try:
        value = json.loads(oracle)
    except ValueError:
        return None
    if not isinstance(value, dict) or not value:
        return None
    items = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in value.items())
    return "{\n  // the values asked for\n" + items + ",\n}"


def probes_for(task: Task) -> tuple[list[Probe], list[Probe]]:
    """(adversarial, natural) probes for ``task``: the shared junk plus its scorer's own."""
    name = task.verifier.name
    junk = [Probe(f"junk:{text!r}", text) for text in JUNK]
    gold, oracle = task.answer, task.oracle_answer.strip()
    if name == "workbook_match":
        return workbook_probes(gold["workbook"], dict(task.files)), []
    if name == "numeric" and (value := as_number(gold)) is not None and math.isnan(value):
        junk = [p for p in junk if not is_nan_text(p.answer)]  # "nan" is this gold's own answer
        adversarial: list[Probe] = []
        natural = [Probe("plain", oracle)]
    elif name == "numeric" and value is not None:
        text = oracle if parse_number(oracle) == value else repr(value)  # the oracle's rounding
        adversarial, natural = numeric_probes(text, value)
    elif name == "exact" and isinstance(gold, str) and gold.strip():
        adversarial, natural = text_probes(gold.strip())
    elif name in ("set", "list") and isinstance(gold, (list, tuple)) and gold:
        adversarial, natural = collection_probes([str(g) for g in gold], ordered=name == "list")
    elif name == "dabench" and isinstance(gold, list) and gold:
        adversarial, natural = dabench_probes(gold, oracle)
    elif name == "sql_execution" and isinstance(gold, str):
        adversarial, natural, correct = _sql_values(task)
        junk = [p for p in junk if p.answer.strip().lower() not in correct]
    elif name == "tablebench" and isinstance(gold, dict):
        adversarial = [
            Probe("empty-final", "Final Answer:"),
            Probe("all", "Final Answer: all of them"),
        ]
        if gold.get("metric") == "ROUGE-L":
            junk, adversarial = _rouge_safe(junk, str(gold.get("answer"))), adversarial[:1]
        else:  # a hedge: a wrong final answer first, the right one after it
            adversarial.append(Probe("second-final", f"Final Answer: all of them\n{oracle}"))
        natural = [
            Probe("oracle", oracle),
            Probe("explained", f"{oracle}\nThis follows from the table's rows."),
        ]
    elif name == "dacode_text":
        adversarial = [
            Probe("empty-object", "{}"),
            Probe(
                "keys-only",
                "{"
                + ", ".join(f'"{k}": null' for k in (gold[0] if isinstance(gold, list) else gold))
                + "}",
            ),
        ]
        natural = [Probe("oracle", oracle), Probe("in-prose", f"Here it is: {oracle}")]
        if (commented := _json5_form(oracle)) is not None:
            natural.append(Probe("json5", commented))
    else:
        adversarial, natural = [], []
    return junk + adversarial, natural


def _reward(task: Task, probe: Probe, profile: str) -> float | str:
    """The probe's reward, or why the scorer raised (scorers must not raise on any answer)."""
    files = probe.files

    def read_file(name: str) -> bytes:
        if files is None or name not in files:
            raise FileNotFoundError(name)
        return files[name]

    context = VerifyContext(task_files=dict(task.files), read_file=read_file)
    try:
        return judge(task.verifier, probe.answer, task.answer, context, profile=profile).reward
    except Exception as exc:  # noqa: BLE001 - a raising scorer is a finding, reported by name
        return f"raised {type(exc).__name__}: {str(exc)[:120]}"


def probe_task(task: Task, profile: str = "strict") -> ProbeResult:
    """Score every probe of ``task``: adversarial ones must score 0, natural ones 1."""
    name = task.verifier.name
    result = ProbeResult(scorer=name, note=NOTES.get(name))
    if task.verify:
        result.probed, result.note = False, "scored by its verify hooks"
        return result
    if name not in PROBED:
        result.probed, result.note = False, "no generator for this scorer"
        return result
    adversarial, natural = probes_for(task)
    for probe in adversarial:
        result.adversarial_tried += 1
        reward = _reward(task, probe, profile)
        if reward != 0.0:
            result.adversarial_nonzero.append(probe.label + _why(reward))
    for probe in natural:
        result.natural_tried += 1
        reward = _reward(task, probe, profile)
        if reward != 1.0:
            result.natural_failed.append(probe.label + _why(reward))
    return result


def _why(reward: float | str) -> str:
    return f" ({reward})" if isinstance(reward, str) else ""


def summarize(results: Iterable[ProbeResult]) -> dict[str, dict[str, Any]]:
    """Per scorer: tasks probed (and not, with why), adversarial tried / scored 0, natural
    tried / scored 1."""
    table: dict[str, dict[str, Any]] = {}
    for r in results:
        row = table.setdefault(
            r.scorer,
            {
                "tasks": 0,
                "adversarial_tried": 0,
                "adversarial_scored_0": 0,
                "natural_tried": 0,
                "natural_scored_1": 0,
                "not_probed": {},
                "note": None,
            },
        )
        if not r.probed:
            row["not_probed"][r.note] = row["not_probed"].get(r.note, 0) + 1
            continue
        row["tasks"] += 1
        row["note"] = row["note"] or r.note
        row["adversarial_tried"] += r.adversarial_tried
        row["adversarial_scored_0"] += r.adversarial_tried - len(r.adversarial_nonzero)
        row["natural_tried"] += r.natural_tried
        row["natural_scored_1"] += r.natural_tried - len(r.natural_failed)
    return dict(sorted(table.items()))


__all__ = [
    "JUNK",
    "PROBED",
    "Probe",
    "ProbeResult",
    "is_nan_text",
    "probe_task",
    "probes_for",
    "summarize",
]
