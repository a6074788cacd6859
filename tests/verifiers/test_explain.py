"""A zero from a bare-number scorer says what was read and which rule failed, never the gold."""

from __future__ import annotations

import inspect
import random

import pytest

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.explain import EXPLAINERS
from analyst_env.verifiers.scorers import SCORERS, judge

CASES = [  # scorer, params, answer, gold, words the line must hold
    ("numeric", {"abs_tol": 0.05}, "It is 41.9", 42, ["read 41.9", "0.05 absolute"]),
    ("numeric", {"decimals": 2, "exact": 3.14159}, "3.15", 3.14, ["read 3.15", "2 decimal"]),
    ("numeric", {}, "either 41 or 42", 42, ["no single number"]),
    ("exact", {}, "  Electronic. ", "electronics", ["read 'electronic'", "not the expected"]),
    ("exact", {}, "   ", "electronics", ["empty"]),
    ("list", {}, "North, East", ["East", "North"], ["2 item(s)", "expected order"]),
    ("set", {}, "East", ["North", "East"], ["read 1 item(s)", "has 2"]),
    ("set", {}, "", ["North"], ["no list could be read"]),
]


@pytest.mark.parametrize("name, params, answer, gold, words", CASES)
def test_a_zero_says_what_was_read_and_which_rule_failed(name, params, answer, gold, words):
    verdict = judge(VerifierSpec(name=name, params=params), answer, gold)
    assert verdict.reward == 0.0
    for word in words:
        assert word in verdict.detail, verdict.detail


def test_a_paying_answer_gets_no_explanation():
    assert judge(VerifierSpec(name="numeric"), "42", 42).detail == ""


@pytest.mark.parametrize("name", sorted(EXPLAINERS))
def test_the_line_never_states_the_gold(name):
    rng = random.Random(name)
    for _ in range(200):
        gold_number = round(rng.uniform(-1e6, 1e6), rng.randint(0, 4))
        gold = {
            "numeric": gold_number,
            "exact": f"secret-{rng.randrange(10**9)}",
            "list": [f"item-{rng.randrange(10**9)}", f"item-{rng.randrange(10**9)}"],
            "set": [f"item-{rng.randrange(10**9)}"],
        }[name]
        answer = rng.choice(["", "no idea", "41", "a, b, c", "[1, 2]", "item-1"])
        detail = judge(VerifierSpec(name=name), answer, gold).detail
        shown = [str(g) for g in (gold if isinstance(gold, list) else [gold])]
        assert not any(s in detail for s in shown), (answer, gold, detail)


def test_every_explainer_names_a_real_scorer():
    assert set(EXPLAINERS) <= set(SCORERS)


def test_every_explainer_takes_its_scorers_parameters_and_defaults():
    """An explainer restates its scorer's parameters (it cannot import the scorer: the
    scorers import it); a default that drifted would explain a tolerance the scorer does
    not apply ("not within 1e-06 absolute" where the scorer allows 1e-3)."""
    for name, explainer in EXPLAINERS.items():
        said = inspect.signature(explainer).parameters
        applied = inspect.signature(SCORERS[name]).parameters
        assert list(said) == list(applied), name
        assert [p.default for p in said.values()] == [p.default for p in applied.values()], name
