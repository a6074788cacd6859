"""Trajectories: episodes played through a live server are recorded and export as notebooks and SFT.

The episode runs over ``/ws`` with the typed client; the recorder writes JSONL
as it goes, and ``analyst-env export trajectories`` turns it into a valid
``.ipynb`` (with stdout, HTML and PNG outputs) and a chat-format SFT record.
"""

from __future__ import annotations

import json

import nbformat
import pytest
from support import SECRET_TOTAL

from analyst_env.cli import main as cli_main
from analyst_env.client import AnalystEnv
from analyst_env.server.app import build_app
from analyst_env.server.local_server import BackgroundServer
from analyst_env.server.runtime import Runtime
from analyst_env.trajectory_files import read_trajectory, trajectories_dir

pytestmark = pytest.mark.live

PLOT = (
    "import matplotlib.pyplot as plt\nimport pandas as pd\ndf = "
    "pd.read_csv('sales.csv')\nprint('rows', len(df))\nplt.plot([1, 2, 3])\nplt.show()\ndf.head(2)"
)


@pytest.fixture(scope="module")
def played(settings, tiny_dataset, tmp_path_factory):
    """One full episode and one abandoned one, through a live server; returns its state dir."""
    state = tmp_path_factory.mktemp("traj-state")
    cfg = settings.model_copy(update={"state_dir": str(state), "record_trajectories": True})
    runtime = Runtime(cfg, datasets=[tiny_dataset])
    try:
        with BackgroundServer(build_app(cfg, runtime=runtime)) as url:
            with AnalystEnv(base_url=url).sync() as env:
                env.reset(task_id="tiny-csv", seed=1)
                env.add_and_execute_code_cell(PLOT)
                env.add_and_execute_code_cell("1/0")
                env.edit_and_execute_current_cell("total = df.amount.sum()\ntotal")
                env.run_sql("SELECT COUNT(*) AS n FROM sales")
                env.execute_shell_command("ls")
                env.final_answer(str(SECRET_TOTAL))
                env.reset(task_id="tiny-sqlite")  # abandoned: no answer
                env.list_files()
    finally:
        runtime.close()
    return state


def test_every_record_is_on_disk_in_order_without_ground_truth(played):
    files = sorted(trajectories_dir(played).glob("*.jsonl"))
    assert len(files) == 2
    first = read_trajectory(files[0])
    assert [r["type"] for r in first] == ["reset"] + ["step"] * 6 + ["end"]
    assert (
        first[0]["task_id"] == "tiny-csv" and first[0]["seed"] == 1 and first[0]["duration_s"] > 0
    )
    assert [r["action"]["tool_name"] for r in first[1:7]][-1] == "final_answer"
    assert all(r["duration_s"] >= 0 for r in first[1:7])
    assert first[-1]["reward"] == 1.0 and first[-1]["end_reason"] == "final_answer"
    second = read_trajectory(files[1])
    assert [r["type"] for r in second] == ["reset", "step", "close"]
    # The gold answer appears only where the agent itself submitted it, never in the reset or the
    # tools' replies
    reset_text = json.dumps(first[0]) + json.dumps(second)
    assert str(SECRET_TOTAL) not in reset_text
    assert "oracle" not in json.dumps(first) and '"verifier"' not in json.dumps(first)


def test_export_ipynb_is_valid_with_stdout_html_png_and_error_outputs(played, tmp_path):
    assert (
        cli_main(
            [
                "export",
                "trajectories",
                "--format",
                "ipynb",
                "--state-dir",
                str(played),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    notebooks = sorted(tmp_path.glob("*.ipynb"))
    assert len(notebooks) == 2
    nb = nbformat.read(notebooks[0], as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.source.splitlines()[0] for c in code] == [
        "import matplotlib.pyplot as plt",
        "total = df.amount.sum()",
        "%%sql",
        "%%sh",
    ]
    outputs = code[0].outputs
    assert any(o.output_type == "stream" and "rows 5" in o.text for o in outputs)
    bundles = [o.data for o in outputs if o.output_type in ("execute_result", "display_data")]
    assert any("image/png" in b for b in bundles) and any("text/html" in b for b in bundles)
    assert "7319.25" in json.dumps(code[1].outputs)  # the edit replaced the failing 1/0 cell
    assert "Reward:** 1.0" in nb.cells[-1].source


def test_export_sft_has_tool_calls_and_matching_tool_messages(played, tmp_path):
    assert (
        cli_main(
            [
                "export",
                "trajectories",
                "--format",
                "sft",
                "--state-dir",
                str(played),
                "--out",
                str(tmp_path),
            ]
        )
        == 0
    )
    records = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert len(records) == 2
    rec = records[0]
    roles = [m["role"] for m in rec["messages"]]
    assert roles[:2] == ["system", "user"] and roles[2:] == ["assistant", "tool"] * 6
    assert "sales.csv" in rec["messages"][1]["content"]
    call = rec["messages"][2]["tool_calls"][0]
    assert call["function"]["name"] == "add_and_execute_code_cell"
    assert json.loads(call["function"]["arguments"])["code"] == PLOT
    assert (
        rec["messages"][3]["tool_call_id"] == call["id"]
        and "rows 5" in rec["messages"][3]["content"]
    )
    assert rec["reward"] == 1.0 and {t["function"]["name"] for t in rec["tools"]} >= {
        "final_answer",
        "run_sql",
    }
    assert records[1]["reward"] is None


def test_export_without_trajectories_or_with_a_bad_format_is_a_clear_error(tmp_path, capsys):
    assert (
        cli_main(["export", "trajectories", "--format", "sft", "--state-dir", str(tmp_path)]) == 1
    )
    assert "no trajectories" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["export", "trajectories", "--format", "pdf", "--state-dir", str(tmp_path)])


def test_recording_can_be_turned_off(settings, tiny_dataset, tmp_path):
    from analyst_env.server.environment import AnalystEnvironment

    cfg = settings.model_copy(update={"state_dir": str(tmp_path), "record_trajectories": False})
    runtime = Runtime(cfg, datasets=[tiny_dataset])
    try:
        env = AnalystEnvironment(runtime)
        env.reset(task_id="tiny-reward-file")
        env.close()
    finally:
        runtime.close()
    assert not trajectories_dir(tmp_path).exists()


def test_the_store_keeps_only_the_newest_files(tmp_path):
    from analyst_env.server.trajectories import TrajectoryStore

    store = TrajectoryStore(tmp_path, keep=3)
    store.root.mkdir(parents=True)
    names = [f"20260101T00000{i}000000Z-ep{i}.jsonl" for i in range(6)]
    for name in names:
        (store.root / name).write_text("{}\n")
    (store.root / "notes.txt").write_text("not a trajectory")
    assert store.prune() == 3
    assert sorted(p.name for p in store.root.iterdir()) == sorted(names[3:] + ["notes.txt"])
    assert TrajectoryStore(tmp_path, keep=0).prune() == 0, "0 keeps everything"
