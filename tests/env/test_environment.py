"""In-process tests of AnalystEnvironment: episodes, tools, rewards and every bad input.

The environment runs on the real local sandbox backend; only the network is absent.
"""

from __future__ import annotations

import base64
import json

import pytest
from support import SECRET_TOTAL, call

from analyst_env.models import AnalystResetObservation, ListToolsAction
from analyst_env.server.environment import AnalystEnvironment

EXPECTED_TOOLS = {
    "add_and_execute_code_cell",
    "edit_and_execute_current_cell",
    "execute_shell_command",
    "get_notebook_state",
    "final_answer",
    "run_sql",
    "list_files",
}


def text(obs) -> str:
    return obs.text


def test_reset_returns_instruction_files_and_tools(env):
    obs = env.reset(task_id="tiny-csv", seed=1, episode_id="ep-1")
    assert isinstance(obs, AnalystResetObservation)
    assert obs.episode_id == "ep-1" and obs.task_id == "tiny-csv"
    assert "total amount" in obs.instruction
    assert obs.status == "ready" and not obs.done and obs.reward is None
    (f,) = obs.files
    assert f.name == "sales.csv" and f.kind == "csv" and f.size_bytes > 0
    assert f.preview["columns"] == ["region", "amount"]
    assert {t.name for t in obs.available_tools} == EXPECTED_TOOLS
    assert obs.max_steps == 8


def test_reset_by_split_and_index_and_by_seed(env, runtime):
    obs = env.reset(split="test", index=0)
    assert obs.task_id == runtime.split("test")[0].id
    drawn = {env.reset(seed=5).task_id for _ in range(3)}
    assert len(drawn) == 1, "the same seed must draw the same task"


def test_bad_reset_options_are_rejected_clearly(env):
    with pytest.raises(ValueError, match="unknown option 'taskid'"):
        env.reset(taskid="tiny-csv")
    with pytest.raises(KeyError, match="Did you mean 'tiny-csv'"):
        env.reset(task_id="tiny-cvs")
    with pytest.raises(IndexError):
        env.reset(split="train", index=99)
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1, task_id="tiny-csv")
    with pytest.raises(ValueError, match="either task_id or split"):
        env.reset(task_id="tiny-csv", split="train")
    with pytest.raises(ValueError, match="'curriculum_group' must be 1-64 characters"):
        env.reset(task_id="tiny-csv", curriculum_group="no spaces/or slashes")


def test_code_cells_share_state_and_report_rich_results(env):
    env.reset(task_id="tiny-csv")
    obs = call(
        env,
        "add_and_execute_code_cell",
        code="import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(len(df))\ndf.head(2)",
    )
    result = obs.result
    assert not result["is_error"]
    assert "5" in obs.text and "region" in obs.text
    assert result["structured_content"]["execution_count"] == 1
    obs = call(env, "add_and_execute_code_cell", code="df.amount.sum()")
    assert str(SECRET_TOTAL) in obs.text
    state = env.state
    assert [c.cell_type for c in state.cells] == ["code", "code"]
    assert any("text/html" in o for o in state.cells[0].outputs), "a DataFrame result carries HTML"


def test_plots_come_back_as_png_image_blocks(env):
    env.reset(task_id="tiny-csv")
    obs = call(
        env,
        "add_and_execute_code_cell",
        code="import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
    )
    images = [c for c in obs.result["content"] if c["type"] == "image"]
    assert len(images) == 1 and images[0]["mimeType"] == "image/png"
    assert base64.b64decode(images[0]["data"]).startswith(b"\x89PNG")
    assert "[Image output: 1 image(s) generated]" in obs.text


def test_errors_are_reported_and_the_kernel_survives(env):
    env.reset(task_id="tiny-csv")
    call(env, "add_and_execute_code_cell", code="x = 41")
    obs = call(env, "add_and_execute_code_cell", code="{}['missing']")
    assert obs.result["is_error"]
    assert "ERROR:" in obs.text and "KeyError" in obs.text
    assert "\x1b[" not in obs.text, "tracebacks must be free of ANSI colour codes"
    obs = call(env, "edit_and_execute_current_cell", code="x + 1")
    assert "42" in obs.text
    assert len(env.state.cells) == 2, "edit replaces the failed cell"


def test_edit_without_a_cell_is_a_clear_error(env):
    env.reset(task_id="tiny-csv")
    obs = call(env, "edit_and_execute_current_cell", code="1")
    assert obs.result["is_error"] and "no code cell to edit" in obs.text


def test_cell_timeout_interrupts_and_leaves_the_episode_usable(env):
    env.reset(task_id="tiny-csv")
    call(env, "add_and_execute_code_cell", code="kept = 'still here'")
    obs = call(env, "add_and_execute_code_cell", code="while True:\n    pass")
    assert obs.result["is_error"]
    assert obs.result["structured_content"]["timed_out"]
    assert "TIMEOUT" in obs.text
    obs = call(env, "add_and_execute_code_cell", code="print(kept)")
    assert "still here" in obs.text


def test_long_output_is_cut_with_a_note(env, settings):
    env.reset(task_id="tiny-csv")
    obs = call(env, "add_and_execute_code_cell", code="print('x' * 50_000)")
    assert len(obs.text) < settings.output_limit_chars + 200
    assert "output truncated" in obs.text


def test_shell_command(env):
    env.reset(task_id="tiny-csv")
    obs = call(
        env, "execute_shell_command", command="head -n 1 sales.csv && echo oops >&2 && exit 3"
    )
    assert "region,amount" in obs.text and "oops" in obs.text and "[exit code 3]" in obs.text
    assert obs.result["is_error"]
    assert env.state.cells[-1].cell_type == "shell"


def test_run_sql_on_csv_sqlite_and_excel(env):
    env.reset(task_id="tiny-csv")
    obs = call(env, "run_sql", query="SELECT SUM(amount) AS total FROM sales")
    assert str(SECRET_TOTAL) in obs.text and obs.result["structured_content"]["engine"] == "duckdb"
    env.reset(task_id="tiny-sqlite")
    obs = call(env, "run_sql", query="SELECT SUM(qty) FROM orders WHERE customer = 'ann'")
    assert "9" in obs.text and obs.result["structured_content"]["engine"] == "sqlite"
    obs = call(env, "run_sql", query="SELECT * FROM nope")
    assert obs.result["is_error"] and obs.text.startswith("SQL error:") and "nope" in obs.text
    env.reset(task_id="tiny-excel")
    obs = call(
        env,
        "run_sql",
        query=(
            "SELECT d.budget FROM staff_people p JOIN staff_depts d USING (dept) WHERE p.name = 'b'"
        ),
    )
    assert "20" in obs.text, obs.text


def test_sql_does_not_touch_execution_count(env):
    env.reset(task_id="tiny-csv")
    call(env, "run_sql", query="SELECT 1")
    obs = call(env, "add_and_execute_code_cell", code="1")
    assert obs.result["structured_content"]["execution_count"] == 1


def test_list_files_and_notebook_state(env):
    env.reset(task_id="tiny-csv")
    call(env, "add_and_execute_code_cell", code="open('notes.txt', 'w').write('hi')")
    obs = call(env, "list_files")
    names = [f["name"] for f in obs.result["structured_content"]["files"]]
    assert "sales.csv" in names and "notes.txt" in names
    obs = call(env, "get_notebook_state")
    assert "[Cell 0]" in obs.text and "notes.txt" in obs.text


def test_final_answer_rewards_and_ends_the_episode(env):
    env.reset(task_id="tiny-csv")
    obs = call(env, "final_answer", answer=f"The total is {SECRET_TOTAL}")
    assert obs.done and obs.reward == 1.0
    state = env.state
    assert state.done and state.reward == 1.0 and state.submitted_answer.endswith(str(SECRET_TOTAL))
    obs = call(env, "add_and_execute_code_cell", code="1")
    assert obs.error is not None and "episode is over" in obs.error.message
    assert obs.done


def test_wrong_answer_gets_zero(env):
    env.reset(task_id="tiny-sqlite")
    obs = call(env, "final_answer", answer="10")
    assert obs.done and obs.reward == 0.0


def test_step_limit_ends_the_episode_with_zero(env):
    env.reset(task_id="tiny-csv")  # max_steps = 8
    for i in range(7):
        assert not call(env, "add_and_execute_code_cell", code=f"{i}").done
    obs = call(env, "add_and_execute_code_cell", code="8")
    assert obs.done and obs.reward == 0.0 and "Step limit reached" in obs.text
    assert env.state.step_count == 8


def test_every_step_counts_including_errors(env):
    env.reset(task_id="tiny-excel", episode_id="count-me")
    call(env, "no_such_tool")
    call(env, "add_and_execute_code_cell", code=5)
    env.step(ListToolsAction())
    call(env, "list_files")
    state = env.state
    assert state.step_count == 4 and state.episode_id == "count-me"


def test_bad_tool_calls_give_clear_errors(env):
    obs = call(env, "add_and_execute_code_cell", code="1")
    assert obs.error.error_type.value == "execution_error" and "not been reset" in obs.error.message
    env.reset(task_id="tiny-csv")
    obs = call(env, "no_such_tool")
    assert (
        obs.error.error_type.value == "tool_not_found"
        and "add_and_execute_code_cell" in obs.error.message
    )
    obs = call(env, "add_and_execute_code_cell", code=123)
    assert obs.error.error_type.value == "invalid_args"
    assert "'code'" in obs.error.message and "got int" in obs.error.message
    obs = call(env, "add_and_execute_code_cell", cod="1")
    assert (
        "unexpected argument 'cod'" in obs.error.message
        and "missing required argument 'code'" in obs.error.message
    )
    obs = call(env, "get_notebook_state", include_images="yes")
    assert obs.error.error_type.value == "invalid_args"


def test_same_task_and_seed_give_the_same_initial_state(runtime):
    draws = []
    for _ in range(2):
        env = AnalystEnvironment(runtime)
        try:
            env.reset(task_id="tiny-csv", seed=123)
            obs = call(
                env,
                "add_and_execute_code_cell",
                code="import random, numpy as np\nprint(random.random(), np.random.rand())",
            )
            draws.append(obs.text)
        finally:
            env.close()
    assert draws[0] == draws[1]
    env = AnalystEnvironment(runtime)
    try:
        env.reset(task_id="tiny-csv", seed=124)
        obs = call(
            env,
            "add_and_execute_code_cell",
            code="import random, numpy as np\nprint(random.random(), np.random.rand())",
        )
        assert obs.text != draws[0]
    finally:
        env.close()


def test_no_ground_truth_in_observations_or_state(env):
    obs = env.reset(task_id="tiny-csv")
    call(env, "list_files")
    dumped = json.dumps(obs.model_dump()) + json.dumps(env.state.model_dump())
    assert str(SECRET_TOTAL) not in dumped
    assert "oracle" not in dumped and "verifier" not in dumped


def test_verify_hooks_score_by_passed_fraction(env):
    obs = env.reset(task_id="tiny-verify-hooks")
    assert obs.status == "ready"
    obs = call(env, "final_answer", answer="done")
    assert obs.reward == pytest.approx(2 / 3), "out.txt is missing, so 2 of 3 checks pass"
    env.reset(task_id="tiny-verify-hooks")
    call(env, "execute_shell_command", command="echo hi > out.txt")
    assert call(env, "final_answer", answer="done").reward == 1.0


def test_reward_txt_overrides_hook_results(env):
    env.reset(task_id="tiny-reward-file")
    assert call(env, "final_answer", answer="anything").reward == 0.25


def test_failed_setup_ends_the_episode_with_a_clear_status(env):
    obs = env.reset(task_id="tiny-bad-setup")
    assert obs.status == "error" and obs.done and "exit 3" in obs.message
    assert call(env, "list_files").error is not None


def test_reset_replaces_the_sandbox(env):
    env.reset(task_id="tiny-csv")
    call(env, "add_and_execute_code_cell", code="leftover = 1")
    env.reset(task_id="tiny-csv")
    obs = call(env, "add_and_execute_code_cell", code="leftover")
    assert "NameError" in obs.text
    assert env.state.step_count == 1


def test_task_provider_methods(env, runtime):
    assert env.list_splits() == ["test", "train"]
    assert env.num_tasks("train") == 2
    spec = env.get_task("train", 1)
    assert spec["id"] == "tiny-sqlite" and spec["index"] == 1
    assert "answer" not in spec and "oracle_answer" not in spec
    assert [t["id"] for t in env.get_task_range("test", 0, 2)] == [
        t.id for t in runtime.split("test")[:2]
    ]
    with pytest.raises(IndexError):
        env.get_task("train", 5)


def test_final_observation_carries_the_reward_breakdown(env):
    env.reset(task_id="tiny-verify-hooks")
    obs = call(env, "final_answer", answer="done")
    breakdown = obs.metadata["reward_breakdown"]
    assert breakdown["components"] == {"verify:0": 1.0, "verify:1": 1.0, "verify:2": 0.0}
    assert breakdown["detail"] == "2/3 verify commands passed"
    assert obs.metadata["end_reason"] == "final_answer"


def test_a_kernel_that_cannot_start_ends_the_episode_at_its_first_call(tmp_path, tiny_dataset):
    """The reset answers before its kernel runs (a kernel order); when the kernel cannot be
    started, the first tool call says so and the episode ends with reward 0."""
    from analyst_env.server.runtime import Runtime
    from analyst_env.server.settings import Settings
    from analyst_env.task_format import Dataset, Task, VerifierSpec

    big = tmp_path / "big.csv"
    big.write_bytes(b"a\n" + b"1\n" * (1024 * 1024))  # 2 MiB: over the episode's 1 MiB disk
    task = Task(
        id="too-big",
        instruction="How many rows are in big.csv?",
        files={"big.csv": str(big)},
        answer=1024 * 1024,
        oracle_answer=str(1024 * 1024),
        verifier=VerifierSpec(name="numeric"),
        split="train",
    )
    runtime = Runtime(
        Settings(disk_limit_mb=1, standbys=0), datasets=[Dataset(name="big", tasks=[task])]
    )
    runtime.backend.warm_up()
    env = AnalystEnvironment(runtime)
    try:
        obs = env.reset(task_id="too-big")
        assert obs.status == "ready" and not obs.done
        first = call(env, "add_and_execute_code_cell", code="1")
        assert first.result["is_error"] and first.done and first.reward == 0.0
        assert "could not be started" in first.text and "task files" in first.text
        assert "The episode is over" in first.text
        assert env.state.done and env.state.step_count == 1
        later = call(env, "list_files")
        assert later.error is not None and "episode is over (setup_failed)" in later.error.message
        assert runtime.metrics.sandbox_failures.labels("reset")._value.get() >= 1
    finally:
        env.close()
        runtime.close()
