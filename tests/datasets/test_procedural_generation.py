"""The procedural generator: counts, determinism, splits, gold that the scorers accept, drops
counted."""

import collections
import json
import re
import sqlite3
from pathlib import Path

import duckdb
import pytest

from analyst_env.datasets.procedural import ProceduralDataset, files
from analyst_env.datasets.procedural.answer_leaks import in_shared_text
from analyst_env.datasets.procedural.coverage import composed_templates
from analyst_env.datasets.procedural.domains import DOMAINS
from analyst_env.datasets.procedural.generator import Dropped, attempt
from analyst_env.datasets.procedural.sampling import fingerprint
from analyst_env.datasets.procedural.splits import HOLDOUT_DOMAINS, HOLDOUT_FAMILIES, SPLIT_SIZE
from analyst_env.datasets.procedural.templates import CATEGORIES, load_all
from analyst_env.datasets.registry import load_dataset
from analyst_env.verifiers.scorers import score

SEED = 424242
SAMPLE = 40


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    return ProceduralDataset(SEED, cache_dir=tmp_path_factory.mktemp("procedural"))


@pytest.fixture(scope="module")
def sample(ds):
    return {split: [ds.task(split, i) for i in range(SAMPLE)] for split in ("train", "test", "ood")}


def test_the_space_has_the_promised_breadth():
    templates = load_all()
    assert len(DOMAINS) >= 30
    assert {t.category for t in templates} == set(CATEGORIES)
    assert len(templates) >= 80
    assert composed_templates()["total"] >= 200
    assert SPLIT_SIZE >= 10**6


@pytest.mark.parametrize("layout", files.LAYOUTS)
def test_a_layout_has_a_workbook_exactly_when_it_writes_one(layout):
    place = files.placement(DOMAINS[0], layout)
    written = {place.fact_file, place.dim_file} - {None}
    assert files.has_workbook(layout) == any(name.endswith(".xlsx") for name in written)


def test_same_seed_same_task_other_seed_other_task(ds, sample, tmp_path):
    again = ProceduralDataset(SEED, cache_dir=tmp_path / "again")
    other = ProceduralDataset(SEED + 1, cache_dir=tmp_path / "other")
    for task in sample["train"][:10]:
        assert fingerprint(again.task_by_id(task.id)) == fingerprint(task)
    assert (
        sum(fingerprint(other.task_by_id(t.id)) != fingerprint(t) for t in sample["train"][:10])
        == 10
    )


def test_every_task_has_data_of_its_own(sample):
    digests = collections.Counter()
    for tasks in sample.values():
        for t in tasks:
            digests.update({b"".join(Path(p).read_bytes() for p in sorted(t.files.values()))})
    assert max(digests.values()) == 1


def test_oracle_scores_one_and_wrong_answers_zero(sample):
    for tasks in sample.values():
        for t in tasks:
            if t.verifier.name in ("workbook_match", "chart_figure"):
                continue  # scored on the saved file: test_procedural_workbooks.py, _charts.py
            assert score(t.verifier, t.oracle_answer, t.answer) == 1.0, t.id
            assert score(t.verifier, "", t.answer) == 0.0, t.id
            if t.verifier.name == "numeric":
                tol = t.verifier.params.get("abs_tol", 1e-6)
                assert score(t.verifier, str(float(t.answer) + 3 * max(tol, 1)), t.answer) == 0.0


def test_splits_keep_holdouts_apart(sample):
    for t in sample["train"] + sample["test"]:
        assert t.metadata["domain"] not in HOLDOUT_DOMAINS
        assert t.metadata["family"] not in HOLDOUT_FAMILIES
    for t in sample["ood"]:
        assert t.metadata["domain"] in HOLDOUT_DOMAINS or t.metadata["family"] in HOLDOUT_FAMILIES
    assert {t.split for t in sample["test"]} == {"test"}


def test_neither_the_gold_nor_the_seed_is_shown(sample):
    for tasks in sample.values():
        for t in tasks:
            public = json.dumps(t.public_view())
            assert str(SEED) not in public
            assert str(SEED) not in "".join(t.files)  # host paths carry a digest, not the seed
            for path in t.files.values():
                assert str(SEED).encode() not in Path(path).read_bytes()
            if t.verifier.name == "numeric" and abs(float(t.answer)) >= 100:
                assert t.oracle_answer not in t.instruction
            if t.verifier.name in ("exact", "set", "list", "dabench"):
                assert not in_shared_text(t.answer)  # "Environment" as a label: in every reset


def test_levels_follow_depth_and_hard_tasks_chain_operations(sample):
    tasks = [t for ts in sample.values() for t in ts]
    levels = collections.Counter(t.metadata["level"] for t in tasks)
    assert set(levels) == {"easy", "medium", "hard"}
    for t in tasks:
        depth = t.metadata["depth"]
        assert t.metadata["level"] == ("easy" if depth <= 2 else "medium" if depth == 3 else "hard")
    assert max(t.metadata["depth"] for t in tasks) >= 4


def test_drops_are_counted(ds, sample):
    stats = ds.stats()
    assert stats["kept"] >= 3 * SAMPLE
    assert stats["attempts"] == stats["kept"] + stats["dropped"]
    assert sum(stats["by_reason"].values()) == stats["dropped"]


def _sql_total(path: str, table: str | None, column: str) -> float:
    if path.endswith(".sqlite"):
        con = sqlite3.connect(path)
        try:
            return con.execute(f'SELECT SUM("{column}") FROM "{table}"').fetchone()[0]
        finally:
            con.close()
    with duckdb.connect() as con:
        return con.execute(f"SELECT SUM(\"{column}\") FROM read_csv_auto('{path}')").fetchone()[0]


def test_tidy_totals_match_sql_over_the_files(tmp_path):
    """A third, independent reading: SQL (DuckDB over a CSV, SQLite over a database) on the
    file as written."""
    checked = 0
    for i in range(300):
        if checked == 3:
            break
        (tmp_path / str(i)).mkdir()
        try:
            t = attempt(3, "train", i, 0, tmp_path / str(i), only="agg_sum_m1")
        except Dropped:
            continue
        if (
            set(t.metadata["defects"]) - {"orphans"}
            or "counting only" in t.instruction
            or t.metadata["layout"] == "excel"
        ):
            continue
        column = t.instruction.split("`")[1]
        table = (
            t.instruction.split("table `")[1].split("`")[0] if "table `" in t.instruction else None
        )
        fact = next(
            p
            for n, p in t.files.items()
            if n.endswith(".sqlite") or n.startswith(t.instruction.split("`")[3].split(".")[0])
        )
        assert round(_sql_total(fact, table, column), 2) == pytest.approx(t.answer, abs=0.011), (
            t.instruction
        )
        checked += 1
    assert checked >= 3


def test_time_zone_defects_are_read_in_utc_and_change_the_answer(tmp_path):
    """Dates written as local timestamps: DuckDB, reading the file in UTC, agrees with the
    gold, and a reading that takes the local calendar day would be wrong for some task."""
    checked, bitten = 0, 0
    for i in range(400):
        if checked == 4:
            break
        (tmp_path / str(i)).mkdir()
        try:
            t = attempt(8, "train", i, 0, tmp_path / str(i), only="clean_timezones_day")
        except Dropped:
            continue
        if t.metadata["layout"] != "csv" or "duplicates" in t.metadata["defects"]:
            continue
        if "counting only" in t.instruction:
            continue
        column = re.search(r"`(\w+)` is the local time", t.instruction).group(1)
        month = re.search(r"dated in (\d{4}-\d{2})", t.instruction).group(1)
        (path,) = t.files.values()
        with duckdb.connect() as con:
            con.execute("SET TimeZone = 'UTC'")
            utc, local = con.execute(
                f'SELECT count(*) FILTER (WHERE strftime(CAST("{column}" AS TIMESTAMPTZ), '
                f"'%Y-%m') = '{month}'), count(*) FILTER (WHERE left(\"{column}\", 7) = "
                f"'{month}') FROM read_csv('{path}', all_varchar = true)"
            ).fetchone()
        assert utc == t.answer, t.instruction
        bitten += local != utc
        checked += 1
    assert checked == 4
    assert bitten, "no task's answer depended on reading the dates in UTC"


def test_ids_and_indices_are_checked(ds):
    assert ds.parse_id("procedural-train-01") is None
    assert ds.parse_id("procedural-train--1") is None
    assert ds.parse_id(f"procedural-train-{SPLIT_SIZE}") is None
    assert ds.parse_id("procedural-dev-1") is None
    with pytest.raises(IndexError):
        ds.task("train", -1)
    with pytest.raises(KeyError):
        ds.task("dev", 0)
    with pytest.raises(TypeError):
        iter(ds.split("train"))
    assert len(ds.split("train")) == SPLIT_SIZE


def test_registry_names(monkeypatch, tmp_path):
    monkeypatch.setenv("ANALYST_ENV_CACHE", str(tmp_path))
    assert load_dataset("procedural:5").seed == 5
    monkeypatch.setenv("ANALYST_ENV_PROCEDURAL_SEED", "77")
    assert load_dataset("procedural").seed == 77
    with pytest.raises(ValueError, match="integer seed"):
        load_dataset("procedural:abc")


@pytest.mark.parametrize("name", ["dedup_count", "set_orphan_keys"])
def test_whole_file_questions_take_no_filters(tmp_path, name):
    """A filter in such a question would change nothing in its answer, so none is ever added."""
    made = 0
    for i in range(25):
        (tmp_path / str(i)).mkdir()
        try:
            t = attempt(11, "train", i, 0, tmp_path / str(i), only=name)
        except Dropped:
            continue
        assert "counting only" not in t.instruction
        made += 1
    assert made >= 5


def test_every_template_makes_tasks_or_drops_them_cleanly(tmp_path):
    """No template raises on any defect mix (a lookup attribute missing for unknown keys, ...)."""
    made = collections.Counter()
    for t in load_all():
        split = "ood" if t.family in HOLDOUT_FAMILIES else "train"
        for i in range(6):
            work = tmp_path / f"{t.name}-{i}"
            work.mkdir()
            try:
                attempt(5, split, i, 0, work, only=t.name)
            except Dropped:
                continue
            made[t.name] += 1
    assert not [t.name for t in load_all() if not made[t.name]]


def test_a_generator_error_is_counted_and_the_index_still_gets_a_task(tmp_path, monkeypatch):
    from analyst_env.datasets.procedural import dataset as module

    real = module.attempt

    def flaky(seed, split, index, tries, directory, **options):
        if tries == 0:
            raise TypeError("a bug in one draw")
        return real(seed, split, index, tries, directory, **options)

    monkeypatch.setattr(module, "attempt", flaky)
    ds = ProceduralDataset(1, cache_dir=tmp_path)
    assert ds.task("train", 0).id == "procedural-train-0"
    assert ds.stats()["by_reason"]["generator-error:TypeError"] == 1


def test_a_validation_sample_larger_than_the_cache_keeps_its_files(tmp_path):
    """Every task of a sample is read again after the last one is made (digests, the
    determinism check, the leak scan): a sample larger than the cache must not lose files."""
    from analyst_env.datasets.procedural.validate_sample import sample_for_validation

    small = ProceduralDataset(SEED, cache_dir=tmp_path, keep_dirs=3)
    tasks, report = sample_for_validation(small, "test", 0, 8)
    assert all(Path(p).exists() for t in tasks for p in t.files.values())
    assert report["distinct_data_ratio"] == 1.0 and report["nondeterministic"] == []
