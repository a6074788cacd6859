"""Which probes a task gets: the shared junk plus its scorer's own, from the task's gold.

Text answers come from :mod:`~analyst_env.verifiers.probe_answers`; here are the
ones that need more than the gold value: the task's database (SQL probes come
from the gold query's own result), its files (workbook probes are files a scorer
refuses before opening them with LibreOffice), and per-benchmark forms
(TableBench's ``Final Answer:`` line, DA-Code's JSON objects).
"""

from __future__ import annotations

import io
import json
import math
import re
import zipfile

from analyst_env.task_format import Task
from analyst_env.verifiers.chart_probes import chart_probes
from analyst_env.verifiers.normalize import as_number, parse_number
from analyst_env.verifiers.probe_answers import (
    JUNK,
    Probe,
    collection_probes,
    dabench_probes,
    is_nan_text,
    numeric_probes,
    text_probes,
)
from analyst_env.verifiers.rubric_probes import rubric_probes
from analyst_env.verifiers.verdict import VerifyContext
from analyst_env.verifiers.workbook_match import MAX_UNPACKED_BYTES


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
    if name == "chart_figure" and isinstance(gold, dict):
        return chart_probes(gold), []
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
    elif name == "rubric" and isinstance(gold, dict):
        limit = int(task.verifier.params.get("max_chars", 600))
        adversarial, natural = rubric_probes(gold, oracle, task.instruction, limit)
    else:
        adversarial, natural = [], []
    return junk + adversarial, natural
