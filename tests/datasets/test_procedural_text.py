"""The generated questions read as English: every word spelt right, a/an as the next word is
read, plurals of the domains' nouns, no word twice in a row, no name that the task's files do
not have.

Hand-made rules once wrote "staies", "plaies" and "a `agent_id`" into 5 % of the tasks. A
word is spelt right when it is in the system word list (Debian's ``wamerican``:
/usr/share/dict/words) or is one of the task's own names: its domain's category values and
units, its files, tables, sheets and columns, or one of the few technical terms every
instruction uses. The article check asks inflect, the library the generator uses, on the
word as it is read (``agent_id`` as "agent id"), independently of the generator's helper.

CI makes 2,500 tasks over the three splits (about 100 s of CPU, spread over one worker
process per core): a wording fault in 0.2 % of tasks shows up with 99 % odds, and the sample
must reach every domain and category. ``ANALYST_ENV_TEXT_SAMPLE=10000`` checks more after a
change to the generator's text (about six minutes of CPU).
"""

from __future__ import annotations

import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from analyst_env.datasets.preview import describe_file
from analyst_env.datasets.procedural import ProceduralDataset, grammar
from analyst_env.datasets.procedural.domains import DOMAINS
from analyst_env.datasets.procedural.tables import ALT_UNITS
from analyst_env.datasets.procedural.templates import CATEGORIES
from analyst_env.task_format import Task, answer_references

WORDS = Path("/usr/share/dict/words")
SAMPLE = int(os.environ.get("ANALYST_ENV_TEXT_SAMPLE", "2500"))
SEED = 20261204
pytestmark = pytest.mark.timeout(1800)  # the sample is made in the first test
CHUNK = 250
SPLITS = {"train": SAMPLE // 2, "test": SAMPLE // 4, "ood": SAMPLE - SAMPLE // 2 - SAMPLE // 4}
"""Tasks per split: ood holds the four held-out domains, whose nouns train never shows."""

TERMS = {
    "csv",  # the file kind, and "CSV file"
    "json",  # "a JSON list"
    "yyyy",  # the date forms YYYY-MM, YYYY-MM-DD, DD/MM/YYYY
    "qn",  # the quarter form YYYY-Qn
    "numpy",  # "as numpy's default does" (percentile interpolation)
    "interquartile",  # the interquartile range
    "recalculated",  # "the workbook is recalculated before it is checked"
    "summarise",  # British spelling, as the rest of the generator's text
    "matplotlib",  # chart tasks: the plotting library
    "svg",  # chart tasks: the matplotlib setting "svg.fonttype"
    "fonttype",
}
"""Words the generator itself writes that the American word list lacks."""

TOOLS = {"final_answer"}
"""Tool names the instructions mention (a workbook task: "call final_answer")."""

DOMAIN_OF = {d.name: d for d in DOMAINS}


@pytest.fixture(scope="module")
def dictionary() -> frozenset[str]:
    if not WORDS.is_file():
        pytest.skip(f"no word list at {WORDS}: apt-get install wamerican")
    return frozenset(w.strip().lower() for w in WORDS.read_text(encoding="utf-8").splitlines())


def _made(split: str, indices: range, cache_dir: Path) -> list[tuple[Task, set[str]]]:
    """Tasks ``indices`` of ``split``, each with its names (read at once: older task files are
    evicted). Run in a worker process."""
    ds = ProceduralDataset(SEED, cache_dir=cache_dir, keep_dirs=64)
    made = []
    for index in indices:
        task = ds.task(split, index)
        made.append((task, _names(task)))
    return made


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> list[tuple[Task, set[str]]]:
    """The sample, made by one worker process per core in chunks of ``CHUNK`` tasks."""
    root = tmp_path_factory.mktemp("text")
    chunks = [
        (split, range(start, min(start + CHUNK, count)), root / f"{split}-{start}")
        for split, count in SPLITS.items()
        for start in range(0, count, CHUNK)
    ]
    # fork: the workers inherit this module (the suite takes the root off sys.path, so a fresh
    # interpreter could not import it by name); they only generate and read files.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=context) as pool:
        parts = pool.map(_made, *zip(*chunks, strict=True))
        return [made for part in parts for made in part]


def _names(task: Task) -> set[str]:
    """The names a task's files and reference workbooks have: files, tables, sheets, columns."""
    paths = {name: path for name, path in task.files.items()}
    for ref in answer_references(task.answer):
        paths[Path(ref["path"]).name] = ref["path"]
    names = set(task.files)
    if isinstance(task.answer, dict) and task.answer.get("workbook"):
        names.add(task.answer["workbook"])  # the workbook the agent saves
    if isinstance(task.answer, dict) and task.answer.get("figure"):
        names.add(task.answer["figure"])  # the figure the agent saves
    for name, path in paths.items():
        preview = describe_file(name, path).preview
        assert "error" not in preview, (task.id, preview)
        parts = {"": preview} if "columns" in preview else preview.get("tables") or {}
        parts = parts or preview.get("sheets") or {}
        for part, shape in parts.items():
            names.add(part)
            names.update(str(c) for c in shape.get("columns", []))
    return names - {""}


def _vocabulary(task: Task) -> set[str]:
    """Words of the task's own that a word list cannot know: its category values and units."""
    d = DOMAIN_OF[task.metadata["domain"]]
    words = set(TERMS)
    for values in (d.g1[1], d.g2[1], d.attr[1]):
        for value in values:
            words.update(re.findall(r"[a-z]+", value.lower()))
    for unit in (d.m1.unit, d.m2.unit):
        words.update(re.findall(r"[a-z]+", unit.lower()))
        words.update(
            w for abbr in ALT_UNITS.get(unit, ())[:2] for w in re.findall(r"[a-z]+", abbr.lower())
        )
    return words


def misspelt(
    text: str, allowed: set[str], dictionary: frozenset[str], names: set[str] = frozenset()
) -> list[str]:
    """Words outside backticks that neither the word list nor the task's vocabulary has, and
    identifiers outside backticks (``@txn_channel[value]``) that are not the task's names."""
    prose = re.sub(r"`[^`]*`", " ", text)
    words = re.findall(r"[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|[A-Za-z]+", prose)
    identifiers = set(names) | TOOLS
    return [
        w
        for w in words
        if (
            w not in identifiers
            if "_" in w
            else w.lower() not in dictionary and w.lower() not in allowed
        )
    ]


def wrong_articles(text: str) -> list[str]:
    """Each "a X" / "an X" whose article is not the one inflect gives X as it is read.

    A capital "A" inside a sentence is a label or a letter ("Plant A and", "A to Z"), not
    an article: only one that starts a sentence is checked.
    """
    engine = grammar.engine()
    wrong = []
    for m in re.finditer(r"(?<![\w`'])(an?|An?) (`[^`]+`|[\w'-]+)", text):
        before = text[: m.start()].rstrip()
        if m.group(1)[0] == "A" and before and before[-1] not in ".?!:":
            continue
        read = re.sub(r"[_`]+", " ", m.group(2)).strip()
        if engine.a(read).split(" ", 1)[0] != m.group(1).lower():
            wrong.append(m.group(0))
    return wrong


def doubled(text: str) -> list[str]:
    """A word (or a name in backticks) written twice in a row: "the the"."""
    pattern = r"(?<![\w`])(`[^`]+`|[A-Za-z]+)\s+\1(?![\w`])"
    return [m.group(0) for m in re.finditer(pattern, text, re.IGNORECASE)]


def unknown_names(text: str, names: set[str]) -> list[str]:
    """Names in backticks that are not the task's files, tables, sheets or columns."""
    return sorted(set(re.findall(r"`([^`]+)`", text)) - names)


def test_every_generated_question_reads_as_english(dictionary, tasks):
    problems = []
    for task, names in tasks:
        text = task.instruction
        found = {
            "misspelt": misspelt(text, _vocabulary(task), dictionary, names),
            "article": wrong_articles(text),
            "doubled": doubled(text),
            "unknown name": unknown_names(text, names),
        }
        problems += [(task.id, kind, sorted(set(v))) for kind, v in found.items() if v]
    assert len(tasks) == SAMPLE
    assert not problems, f"{len(problems)} problems, the first: {problems[:10]}"


def test_the_sample_covers_every_domain_and_category(tasks):
    """A sample that missed a domain would leave its nouns and column names unchecked."""
    assert {t.metadata["domain"] for t, _ in tasks} == set(DOMAIN_OF)
    assert {t.metadata["category"] for t, _ in tasks} == set(CATEGORIES)


def test_the_checks_catch_the_old_mistakes(dictionary):
    """The checks are not blind: the old generator's errors are found."""
    old = "How many staies have a `agent_id` above the the median? Give a JSON list."
    assert misspelt(old, set(TERMS), dictionary) == ["staies"]
    assert wrong_articles(old) == ["a `agent_id`"]
    assert doubled(old) == ["the the"]
    assert unknown_names(old, {"agent_id"}) == [] and unknown_names(old, {"agents"}) == ["agent_id"]
    parts = "Your final answer must contain @txn_chanel[value]."
    assert misspelt(parts, set(), dictionary, {"txn_channel"}) == ["txn_chanel"]
    assert wrong_articles("An `order_id`, a unit, an hour, a `units`, an `item_count`") == []
    assert wrong_articles("Plant A and Plant B, sorted A to Z. A `agent_id` is") == ["A `agent_id`"]


@pytest.mark.parametrize("d", DOMAINS, ids=lambda d: d.name)
def test_each_domain_noun_is_singular_and_its_plural_is_a_word(d, dictionary):
    """Plurals are made from the singular (a plural entity would be pluralised as itself)."""
    assert not grammar.is_plural(d.entity)
    many = grammar.plural(d.entity)
    assert grammar.is_plural(many) and grammar.plural(many) == many
    assert all(w in dictionary for w in many.split()), many
    assert many.split()[:-1] == d.entity.split()[:-1]  # "grade records": only the head changes


def test_articles_follow_how_an_identifier_is_read():
    assert grammar.article("`agent_id`") == "an `agent_id`"
    assert grammar.article("`operator_id`", capital=True) == "An `operator_id`"
    assert grammar.article("`units`") == "a `units`"  # "units" begins with a "y" sound
    assert grammar.article("`hour_rate`") == "an `hour_rate`"  # a silent h
    assert grammar.article("`customer_id`") == "a `customer_id`"


def test_importing_inflect_leaves_typeguard_as_it_was():
    """The generator imports inflect without typeguard's instrumentation (3 s of CPU), and
    puts the decorator back for every other module."""
    import typeguard
    from typeguard import _decorators

    grammar.engine()
    assert typeguard.typechecked is _decorators.typechecked
