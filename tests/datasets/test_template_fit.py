"""Templates that look at the data before asking: a question drawn so that it has an answer to
give is not drawn again, and an attempt is not dropped for it.

The set differences ("which values occur with a but never with b") are asked of small tables
about a pair that differs; a cohort is asked about a month whose count the month's own name
does not spell; a label answer that every episode shows is caught on the clean tables, before
any file is written."""

import numpy as np
import pandas as pd
import pytest

from analyst_env.datasets.procedural import generator
from analyst_env.datasets.procedural.attempt_draw import draw_attempt
from analyst_env.datasets.procedural.generator import Dropped, attempt
from analyst_env.datasets.procedural.t_relations import SET_DIFFERENCE_MAX_ROWS, _cohort_month
from analyst_env.datasets.procedural.templates import Ctx


def _ctx(records: dict, seed: int) -> Ctx:
    frame = pd.DataFrame(records)
    if "date" in frame:
        frame["date"] = pd.to_datetime(frame["date"], format="%Y-%m-%d")
    return Ctx(None, frame, np.random.default_rng(seed))  # type: ignore[arg-type]


def test_a_set_difference_is_asked_of_a_pair_that_differs():
    # g1 "east" occurs with "web" and "shop" only; every other g1 value with all three channels
    records = {
        "g2": ["web", "shop", "phone", "web", "shop", "phone", "web", "shop"],
        "g1": ["north", "north", "north", "south", "south", "south", "east", "east"],
    }
    drawn = {_ctx(records, seed).pick_only_with("g1") for seed in range(40)}
    assert drawn == {("web", "phone"), ("shop", "phone")}


def test_no_pair_is_drawn_when_every_value_occurs_with_every_other():
    records = {"g2": ["web", "shop", "web", "shop"], "g1": ["north", "north", "south", "south"]}
    assert _ctx(records, 0).pick_only_with("g1") is None
    # a lookup attribute missing for a key (NaN) is no value of its own
    records = {"g2": ["web", "shop", "web"], "attr": ["gold", "gold", np.nan]}
    assert _ctx(records, 0).pick_only_with("attr") is None


@pytest.mark.parametrize("name", ["set_only_with", "set_attr_only_with"])
def test_set_differences_are_drawn_on_small_tables(name):
    rows = [
        draw_attempt(np.random.default_rng([3, i, 0]), "train", only=name).rows for i in range(60)
    ]
    assert max(rows) <= SET_DIFFERENCE_MAX_ROWS < 2000


def test_a_cohort_is_asked_about_a_month_that_does_not_spell_its_count():
    records = {  # cohorts: 2024-01 has one key, 2024-02 three (two seen again in March)
        "key": ["a", "b", "c", "d", "b", "c", "e"],
        "date": [
            "2024-01-05",
            "2024-02-01",
            "2024-02-03",
            "2024-02-09",
            "2024-03-02",
            "2024-03-07",
            "2024-03-08",
        ],
    }
    # size: "1" is in "2024-01", 3 is in no month name; retained: 2024-01 keeps none
    assert {_cohort_month(_ctx(records, s), "size") for s in range(20)} == {"2024-02"}
    assert {_cohort_month(_ctx(records, s), "retained") for s in range(20)} == {None}
    records["key"][3] = "c"  # now 2024-02 has two keys, both seen again: "2" is in "2024-02"
    assert _cohort_month(_ctx(records, 0), "size") is None


def test_a_label_every_episode_shows_is_redrawn_before_any_file_is_written(tmp_path, monkeypatch):
    """With every label counted as shown, the screen rejects each question on the clean
    tables: the attempt is dropped for that reason with nothing written."""
    monkeypatch.setattr(generator, "in_shared_text", lambda answer: True)
    reasons: list[str] = []
    for i in range(4):
        work = tmp_path / str(i)
        work.mkdir()
        with pytest.raises(Dropped) as dropped:
            attempt(5, "train", i, 0, work, only="join_top_attr_sum", redrawn=reasons.append)
        assert dropped.value.reason == "answer-in-shared-text"
        assert not any(work.iterdir())
    assert reasons and set(reasons) == {"answer-in-shared-text"}
