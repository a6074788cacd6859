"""Built-in scorers: right, wrong, empty and malformed answers, tolerances, the registry."""

import pytest

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import SCORERS, score


def s(name, submitted, gold, **params):
    return score(VerifierSpec(name=name, params=params), submitted, gold)


def test_registry_has_builtins():
    assert {"exact", "numeric", "dabench", "set", "list"} <= set(SCORERS)


def test_unknown_verifier_lists_known():
    with pytest.raises(ValueError, match=r"unknown verifier 'nope'; available: .*numeric"):
        s("nope", "1", 1)


@pytest.mark.parametrize("submitted", ["North", "  north ", '"North".', "'NORTH'", "north."])
def test_exact_normalizes(submitted):
    assert s("exact", submitted, "North") == 1.0


@pytest.mark.parametrize("submitted", ["South", "", "   ", "North region", "\x00\xff"])
def test_exact_wrong_or_empty(submitted):
    assert s("exact", submitted, "North") == 0.0


@pytest.mark.parametrize(
    "submitted",
    ["42", "42.0", "The answer is 42.0", "$42", "42%", "**42**", " 4.2e1 ", "answer: 42.0000001"],
)
def test_numeric_accepts(submitted):
    assert s("numeric", submitted, 42) == 1.0


def test_numeric_thousands_and_currency():
    assert s("numeric", "Total revenue: $1,234,567.89.", 1234567.89) == 1.0
    assert s("numeric", "-$5.50", -5.5) == 1.0
    assert s("numeric", "−3.2", -3.2) == 1.0  # unicode minus


@pytest.mark.parametrize("submitted", ["", "none", "43", "NaN", "inf", "[1, 2", "42.1"])
def test_numeric_rejects(submitted):
    assert s("numeric", submitted, 42) == 0.0


def test_numeric_tolerances():
    assert s("numeric", "34.66", 34.65) == 0.0
    assert s("numeric", "34.66", 34.65, abs_tol=0.0101) == 1.0
    assert s("numeric", "34.67", 34.65, abs_tol=0.0101) == 0.0
    assert s("numeric", "101", 100, rel_tol=0.02) == 1.0
    assert s("numeric", "103", 100, rel_tol=0.02) == 0.0


def test_numeric_uses_last_number():
    assert s("numeric", "In 2023 there were 17 orders", 17) == 1.0


def test_numeric_gold_as_string():
    assert s("numeric", "0.5", "0.50") == 1.0


GOLD = [["mean_fare", "34.65"], ["is_normal", "no"]]


def test_dabench_all_parts():
    assert s("dabench", "@mean_fare[34.65] @is_normal[no]", GOLD) == 1.0
    assert s("dabench", "Result: @is_normal[no], and @mean_fare[34.650000]", GOLD) == 1.0


def test_dabench_float_rule_is_strict():
    assert s("dabench", "@mean_fare[34.6500001] @is_normal[no]", GOLD) == 1.0  # < 1e-6
    assert s("dabench", "@mean_fare[34.651] @is_normal[no]", GOLD) == 0.0


def test_dabench_strings_are_exact():
    assert s("dabench", "@mean_fare[34.65] @is_normal[No]", GOLD) == 0.0
    assert s("dabench", "@mean_fare[34.65] @is_normal[ no]", GOLD) == 0.0


def test_dabench_partial_credit_off_by_default():
    assert s("dabench", "@mean_fare[34.65]", GOLD) == 0.0
    assert s("dabench", "@mean_fare[34.65]", GOLD, partial_credit=True) == 0.5


@pytest.mark.parametrize(
    "submitted", ["", "34.65 no", "@mean_fare(34.65)", "@[", "@mean_fare[34.65"]
)
def test_dabench_malformed(submitted):
    assert s("dabench", submitted, GOLD) == 0.0


def test_dabench_empty_label_value():
    assert s("dabench", "@outliers[]", [["outliers", ""]]) == 1.0
    assert s("dabench", "", [["outliers", ""]]) == 0.0


@pytest.mark.parametrize(
    "submitted",
    [
        '["East", "North", "West"]',
        "West, north, East",
        "- West\n- East\n- North",
        "['West','East','North']",
        'The regions are ["West", "East", "North"].',
        "West; East; North",
        "West, West, East, North",
    ],
)
def test_set_accepts_any_order(submitted):
    assert s("set", submitted, ["North", "East", "West"]) == 1.0


@pytest.mark.parametrize(
    "submitted", ["", "North, East", "North, East, West, South", "[", "[]", "{}"]
)
def test_set_rejects(submitted):
    assert s("set", submitted, ["North", "East", "West"]) == 0.0


def test_set_numbers_with_tolerance():
    assert s("set", "[1.0, 2.00]", [2, 1]) == 1.0
    assert s("set", "[1.1, 2]", [2, 1], abs_tol=0.2) == 1.0
    assert s("set", "[1.5, 2]", [2, 1], abs_tol=0.2) == 0.0


def test_list_requires_order():
    gold = ["ATL-BOS", "SEA-SFO", "JFK-LAX"]
    assert s("list", '["ATL-BOS", "SEA-SFO", "JFK-LAX"]', gold) == 1.0
    assert s("list", "1. atl-bos\n2. sea-sfo\n3. jfk-lax", gold) == 1.0
    assert s("list", '["SEA-SFO", "ATL-BOS", "JFK-LAX"]', gold) == 0.0
    assert s("list", '["ATL-BOS", "SEA-SFO"]', gold) == 0.0
    assert s("list", "", gold) == 0.0


def test_never_raises_on_garbage():
    junk = ["[" * 5000, "@" * 1000, "\ud800", "1e999999", "{'a': }", "]" + "[" * 3]
    for name, gold in [
        ("exact", "x"),
        ("numeric", 1),
        ("dabench", GOLD),
        ("set", ["a"]),
        ("list", ["a"]),
    ]:
        for text in junk:
            assert s(name, text, gold) == 0.0
