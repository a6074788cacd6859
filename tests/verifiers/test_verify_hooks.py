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


@pytest.mark.parametrize("txt,want", [("0.25", 0.25), (" 1\n", 1.0), ("0", 0.0), ("1e-1", 0.1)])
def test_reward_txt_overrides(txt, want):
    assert reward_from_verify([1, 1], txt) == want


@pytest.mark.parametrize(
    "txt", ["", "pass", "nan", "0.5 0.5", "1,0", "1.5", "-3", "inf", "1e309", "-0.01", "1" * 100]
)
def test_an_invalid_reward_txt_scores_0_even_when_every_command_passed(txt):
    # Clamping "1e309" or "2" to 1.0 would turn a broken (or planted) file into a full reward.
    assert reward_from_verify([0, 0], txt) == 0.0
