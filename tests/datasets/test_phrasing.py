"""Generated questions are worded several ways, each asking exactly what the template asked."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from analyst_env.datasets.procedural.diversity import diversity
from analyst_env.datasets.procedural.draft import Draft
from analyst_env.datasets.procedural.phrasing import (
    QUESTION_FORMS,
    format_request,
    reword_question,
    wording_rng,
)

QUESTIONS = [
    "How many orders have `amount` greater than 12.5, counting only the orders dated in 2024?",
    "How many stays are dated in 2020-02 (year-month, by `checkin_date`)?",
    "What is the average `price` (USD) over all listings?",
    "Which 2 `vehicle_class` values have the lowest total `liters`?",
    "Which `queue` has the most support tickets?",
]


IMPERATIVES = ("Count ", "Find ", "Compute ", "Name ", "I need ")


def _forms(question: str) -> set[str]:
    return {reword_question(question, random.Random(i)) for i in range(200)}


@pytest.mark.parametrize("question", QUESTIONS)
def test_every_form_keeps_what_the_question_names_and_ends_as_a_sentence(question):
    forms = _forms(question)
    assert len(forms) >= 3, forms  # the written form, others, and leads
    named = [w for w in question.rstrip("?").split() if "`" in w or w[0].isdigit()]
    for form in forms:
        assert all(w in form for w in named), (form, named)
        if form.endswith("?"):
            assert re.search(r"\b(how many|what|which)\b", form, re.I), form
        else:
            assert form.endswith(".") and form.startswith(IMPERATIVES), form
        assert "  " not in form and form[0].isupper()


def test_every_pattern_can_be_left_as_written():
    for question in QUESTIONS:
        assert question in _forms(question)
    assert all(forms[0].__name__ == "<lambda>" for _, forms in QUESTION_FORMS)


def test_a_question_no_pattern_fits_keeps_its_words():
    question = "Rank the `drug_class` values by total `copay`, highest first. Which one is second?"
    for form in _forms(question):
        assert form == question


def test_an_order_closed_by_a_question_mark_ends_in_a_full_stop():
    question = (
        "Using the `b` of each loan's `m` in the lookup table, rank the `b` values by total `f`?"
    )
    assert all(form.endswith("`f`.") for form in _forms(question))


@pytest.mark.parametrize(
    "draft, must",
    [
        (Draft("q", 1.25, "number", "easy", decimals=2), ["2 decimal places", "units"]),
        (Draft("q", 1.2, "number", "easy", decimals=1), ["1 decimal place"]),
        (Draft("q", 3, "integer", "easy"), []),
        (Draft("q", "A", "text", "easy", what="`line` value"), ["`line` value"]),
        (Draft("q", ["a"], "set", "easy", what="`x` values"), ["`x` values", "JSON"]),
        (
            Draft("q", ["a"], "list", "easy", what="`x` values", order="highest first"),
            ["`x` values", "JSON", "highest first"],
        ),
    ],
)
def test_every_answer_format_wording_asks_for_the_same_answer(draft, must):
    wordings = {format_request(draft, random.Random(i)) for i in range(100)}
    assert len(wordings) >= 2
    for wording in wordings:
        assert all(m in wording for m in must), (wording, must)
        assert "1 decimal places" not in wording


def test_a_tasks_wording_is_its_own_and_repeatable():
    a = wording_rng(1, "train", 5, 0).random()
    assert a == wording_rng(1, "train", 5, 0).random()
    assert a != wording_rng(1, "train", 6, 0).random() != wording_rng(2, "train", 5, 0).random()


def test_generated_questions_vary_in_how_they_open(tmp_path):
    from analyst_env.datasets.procedural import ProceduralDataset

    ds = ProceduralDataset(3, cache_dir=tmp_path, keep_dirs=4)
    tasks = [ds.task("train", i) for i in range(60)]
    closings = Counter(t.instruction.rsplit("\n\n", 1)[-1].split()[0] for t in tasks)
    assert len(closings) >= 4, closings  # "Give", "Answer", "Reply", "Round", ...
    figures = diversity(t.instruction.split("\n\n", 1)[0] for t in tasks)
    assert figures["distinct_opening_trigrams"] >= 25, figures


def test_diversity_counts_wording_not_names():
    same = ["What is the total `a`?", "What is the total `b`?", 'What is the total "c"?']
    assert diversity(same) == {
        "questions": 3,
        "distinct_opening_trigrams": 1,
        "distinct_lengths": 1,
    }
    with pytest.raises(ValueError, match="no questions"):
        diversity([])
