"""DA-Code (csv files, JSON text) and TableBench (EM, EM±10 %, ROUGE-L, chart data) scorers."""

from __future__ import annotations

import pytest

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import VerifyContext, judge
from analyst_env.verifiers.tablebench import exact_match, rouge_l


@pytest.fixture()
def gold_csv(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("Category,Units\nRoad,27.95\nKids,35.727\n")
    return str(path)


def csv_reward(gold_csv, written: bytes | None, **options) -> float:
    def read(name):
        if written is None or name != "out.csv":
            raise FileNotFoundError(name)
        return written

    gold = {"outputs": [{"file": "out.csv", "gold": [gold_csv], "options": options}]}
    return judge(VerifierSpec(name="dacode_csv"), "", gold, VerifyContext(read_file=read)).reward


def test_dacode_csv_right_within_tolerance_and_case(gold_csv):
    assert csv_reward(gold_csv, b"category,units\nroad,27.955\nkids,35.73\n") == 1.0


def test_dacode_csv_tolerance_edge_and_divide_rule(gold_csv):
    assert (
        csv_reward(gold_csv, b"c,u\nRoad,27.97\nKids,35.727\n") == 0.5
    )  # 0.02 off: one of two columns
    assert csv_reward(gold_csv, b"c,u\nRoad,27.97\nKids,35.727\n", score_rule="all") == 0.0
    assert csv_reward(gold_csv, b"c,u\nRoad,27.97\nKids,35.727\n", condition_cols=[0]) == 1.0


def test_dacode_csv_row_order(gold_csv):
    swapped = b"c,u\nKids,35.727\nRoad,27.95\n"
    assert csv_reward(gold_csv, swapped) == 0.0
    assert csv_reward(gold_csv, swapped, ignore_order=True) == 1.0


def test_dacode_csv_missing_empty_malformed(gold_csv):
    assert csv_reward(gold_csv, None) == 0.0
    assert csv_reward(gold_csv, b"") == 0.0
    assert csv_reward(gold_csv, b"\xff\xfe\x00garbage") == 0.0


def test_dacode_csv_a_file_the_reader_refuses_scores_zero_without_raising(gold_csv):
    def refuse(name):
        raise OSError(f"{name} is a symbolic link; only regular files are scored")

    gold = {"outputs": [{"file": "out.csv", "gold": [gold_csv], "options": {}}]}
    verdict = judge(VerifierSpec(name="dacode_csv"), "", gold, VerifyContext(read_file=refuse))
    assert verdict.reward == 0.0 and "symbolic link" in verdict.detail


def test_dacode_csv_bad_option_is_an_error(gold_csv):
    with pytest.raises(ValueError, match="score_rule"):
        csv_reward(gold_csv, b"c,u\nRoad,1\nKids,2\n", score_rule="most")


def text(answer: str, gold, **params) -> float:
    return judge(VerifierSpec(name="dacode_text", params=params), answer, gold).reward


def test_dacode_text_rules():
    gold = {"highest country": ["Uruguay"], "Land %": [82.6]}
    assert text('Here: {"Highest Country": "uruguay", "land %": 82.609}', gold) == 1.0
    assert text('{"highest country": ["Uruguay"], "land %": [82.62]}', gold) == 0.0
    assert text('{"highest country": ["Uruguay"]}', gold) == 0.0
    assert text('{"highest country": ["Uruguay"]}', gold, score_rule="divide") == 0.5
    assert text("", gold) == 0.0 and text("{not json}", gold) == 0.0
    top = {"top": ["A", "B", "C"]}
    assert text('{"top": ["C", "A", "B"]}', top) == 0.0
    assert text('{"top": ["C", "A", "B"]}', top, ignore_order=True) == 1.0
    assert text('{"top": ["A", "B"]}', top, ignore_order=True) == 0.0


def tb(answer: str, reference: str, metric: str, profile: str = "official") -> float:
    return judge(
        VerifierSpec(name="tablebench"),
        answer,
        {"answer": reference, "metric": metric},
        profile=profile,
    ).reward


def test_tablebench_em_uses_final_answer_and_reference_precision():
    assert tb("I think...\nFinal Answer: 1062", "1062", "EM") == 1.0
    assert exact_match("1062", "1062.4") == 1.0  # rounded to the reference's 0 decimals
    assert (
        tb("Final Answer: 1062.4", "1062", "EM") == 0.0
    )  # ...but upstream drops the "." first: 10624
    assert (
        tb("Final Answer: 1062.4", "1062", "EM", profile="strict") == 1.0
    )  # strict keeps the number whole
    assert tb("Final Answer: 1063", "1062", "EM") == 0.0
    assert exact_match("spain, france", "spain, italy") == pytest.approx(0.5)  # 1/n per item
    assert (
        tb("Final Answer: Spain, Italy", "spain, france", "EM") == 0.0
    )  # upstream: commas gone, one item
    assert tb(
        "Final Answer: Spain, Italy", "spain, france", "EM", profile="strict"
    ) == pytest.approx(0.5)
    assert tb("", "1062", "EM") == 0.0


def test_tablebench_em_within_ten_percent():
    assert tb("Final Answer: 1300", "1213", "EM_with_error_10") == 1.0
    assert tb("Final Answer: 1400", "1213", "EM_with_error_10") == 0.0
    assert tb("Final Answer: No clear trend", "No clear trend", "EM_with_error_10") == 1.0


def test_tablebench_rouge_l_partial_credit():
    ref = "The table shows marriages rising from 2005 to 2011"
    assert tb(f"Final Answer: {ref}", ref, "ROUGE-L") == 1.0
    partial = tb("Final Answer: marriages rising", ref, "ROUGE-L")
    assert 0.0 < partial < 1.0
    assert rouge_l("a b c d", "a c") == pytest.approx(2 * (1.0 * 0.5) / 1.5)


def test_tablebench_upstream_quirk_is_kept():
    # upstream strips punctuation before splitting on commas: "9.34, 1.18" becomes one item "934
    # 118"
    assert exact_match("934 118", "934 118") == 1.0
    assert tb("Final Answer: 9.34, 1.18", "9.34, 1.18", "EM") == 1.0
    assert tb("Final Answer: 9.34, 1.19", "9.34, 1.18", "EM") == 0.0


def test_tablebench_chart_series_and_bad_metric():
    ref = "y_references = [[132046, 106513.004]]"
    assert tb("Final Answer: y_references = [[132046, 106513]]", ref, "Pass@1") == 1.0
    assert tb("Final Answer: y_references = [[132046, 106514]]", ref, "Pass@1") == 0.0
    assert tb("Final Answer: a bar chart", ref, "Pass@1") == 0.0
    with pytest.raises(ValueError, match="metric"):
        tb("x", "y", "BLEU")


def test_tablebench_strict_profile_keeps_signs_and_refuses_extra_items():
    for loophole in ("3.24", "324"):  # upstream strips "-" and "." from both sides
        assert tb(f"Final Answer: {loophole}", "-3.24", "EM") == 1.0
        assert tb(f"Final Answer: {loophole}", "-3.24", "EM", profile="strict") == 0.0
    assert tb("Final Answer: -3.24", "-3.24", "EM", profile="strict") == 1.0
    assert tb("Final Answer: 9.34, 1.18", "9.34, 1.18", "EM", profile="strict") == 1.0
    assert tb("Final Answer: 1,234", "1234", "EM", profile="strict") == 1.0
    assert tb("Final Answer: spain, france, italy", "spain, france", "EM", profile="strict") == 0.0
    assert tb("Final Answer: spain, france", "spain, france", "EM") == 1.0  # strict is the default:
    assert (
        judge(
            VerifierSpec(name="tablebench"),
            "Final Answer: 324",
            {"answer": "-3.24", "metric": "EM"},
        ).reward
        == 0.0
    )


def test_dacode_csv_strict_profile_refuses_extra_candidate_columns(tmp_path):
    import pandas as pd

    from analyst_env.verifiers import VerifyContext

    gold_file = tmp_path / "gold.csv"
    pd.DataFrame({"x": [1.0, 2.0]}).to_csv(gold_file, index=False)
    spray = (
        pd.DataFrame({"a": [1.0, 3.0], "b": [1.0, 2.0], "c": [0.0, 2.0]})
        .to_csv(index=False)
        .encode()
    )
    exact = pd.DataFrame({"x": [1.0, 2.0]}).to_csv(index=False).encode()
    gold = {"outputs": [{"file": "out.csv", "gold": [str(gold_file)]}]}
    spec = VerifierSpec(name="dacode_csv")

    def run(data, profile):
        return judge(
            spec, "done", gold, VerifyContext(read_file=lambda name: data), profile=profile
        ).reward

    assert run(spray, "official") == 1.0 and run(spray, "strict") == 0.0
    assert run(exact, "official") == 1.0 and run(exact, "strict") == 1.0


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ({"n": 12}, '{"n": 12.9}'),  # upstream's int(12.9) is 12
        ({"n": 0}, '{"n": -0.99}'),
        ({"n": 1}, '{"n": true}'),
        ({"flag": True}, '{"flag": "no"}'),  # upstream's bool("no") is True
        ({"flag": True}, '{"flag": "false"}'),
        ({"flag": False}, '{"flag": ""}'),
    ],
)
def test_dacode_text_strict_refuses_a_cast_that_changes_the_answer(gold, answer):
    spec = VerifierSpec(name="dacode_text")
    assert judge(spec, answer, gold, profile="official").reward == 1.0
    assert judge(spec, answer, gold, profile="strict").reward == 0.0


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ({"n": 12}, '{"n": 12.0}'),
        ({"n": 12}, '{"n": "12"}'),
        ({"n": [12]}, '{"n": 12}'),
        ({"x": 1.5}, '{"x": "1.5"}'),
        ({"flag": True}, '{"flag": true}'),
        ({"flag": False}, '{"flag": [false]}'),
        ({"flag": True}, '{"flag": "True"}'),  # the text of a truth value is that value
        ({"flag": False}, '{"flag": " false "}'),
    ],
)
def test_dacode_text_strict_keeps_the_casts_that_keep_the_value(gold, answer):
    assert text(answer, gold) == 1.0


def test_dacode_text_infinity_for_an_int_scores_0_in_both_profiles():
    spec = VerifierSpec(name="dacode_text")
    for profile in ("strict", "official"):  # int(inf) raised OverflowError past the cast's catch
        verdict = judge(spec, '{"n": Infinity}', {"n": 12}, profile=profile)
        assert verdict.reward == 0.0 and "failed" not in verdict.detail
