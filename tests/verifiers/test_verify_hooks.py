"""The verify-hook reward rule: passed/total unless reward.txt overrides."""

import pytest

from analyst_env.verifiers import reward_from_verify


def test_fraction_passed():
    assert reward_from_verify([0, 0, 1, 2], None) == 0.5
    assert reward_from_verify([0], None) == 1.0


def test_timeouts_count_as_failures():
    assert reward_from_verify([0, None], None) == 0.5


def test_tuples_with_exit_code_first():
    assert reward_from_verify([(0, "ok", ""), (1, "", "boom")], None) == 0.5


def test_no_results_is_zero():
    assert reward_from_verify([], None) == 0.0


@pytest.mark.parametrize("txt,want", [("0.25", 0.25), (" 1\n", 1.0), ("1.5", 1.0), ("-3", 0.0), ("inf", 1.0)])
def test_reward_txt_overrides_and_clamps(txt, want):
    assert reward_from_verify([1, 1], txt) == want


@pytest.mark.parametrize("txt", ["", "pass", "nan", "0.5 0.5", "1,0"])
def test_malformed_reward_txt_falls_back(txt):
    assert reward_from_verify([0, 1], txt) == 0.5
