"""OpenRLHF integration: OpenRLHF's loader and multi-turn executor play our agent file live.

OpenRLHF pins GPU packages (deepspeed, flash-attn, vllm), so ``.ci/run`` installs
only its wheel, without dependencies, into ``.venv/openrlhf`` (a package folder
put after this venv's own, whose torch and transformers it uses; or
``$ANALYST_ENV_OPENRLHF_PATH``). Its agent-loading function,
``_load_agent_executor``, lives in ``openrlhf/trainer/ray/vllm_engine.py``,
which imports vllm and ray at the top; the test compiles that very function
from the installed file and runs it on our file, then OpenRLHF's
``MultiTurnAgentExecutor.execute`` drives the episode against a live server. The
policy is scripted at vLLM's interface (``llm_engine.generate`` with token ids
in, a ``RequestOutput``-shaped reply out), tokenized with a tiny local Qwen3
tokenizer. Nothing trains: that needs OpenRLHF's GPU stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from support import curriculum_server
from tcp_cuts import DroppingProxy, later

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
PACKAGES = Path(os.environ.get("ANALYST_ENV_OPENRLHF_PATH", REPO / ".venv" / "openrlhf"))
AGENT_FILE = REPO / "trainers" / "openrlhf_agent.py"
ANSWER = "7319.25"  # tiny-csv's answer
SLOW_CELL = "runs = globals().get('runs', 0) + 1\nimport time\ntime.sleep(1.5)\nprint(runs)"

SCRIPT = r"""
import ast, asyncio, json, os, sys
from pathlib import Path
from types import SimpleNamespace

sys.path.append(sys.argv[1])  # OpenRLHF after this venv's packages (it ships a top-level tests/)
import openrlhf
from openrlhf.utils.agent import AgentExecutorBase
from analyst_env.benchmarks.tiny_tokenizer import tiny_qwen3_tokenizer



def openrlhf_loader():
    # OpenRLHF's own _load_agent_executor, compiled from its installed vllm_engine.py
    source = Path(openrlhf.__file__).parent / "trainer" / "ray" / "vllm_engine.py"
    tree = ast.parse(source.read_text())
    (fn,) = [n for n in tree.body
             if isinstance(n, ast.FunctionDef) and n.name == "_load_agent_executor"]
    namespace = {"AgentExecutorBase": AgentExecutorBase}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), str(source), "exec"), namespace)
    return namespace["_load_agent_executor"]


class ScriptedEngine:
    # vLLM's generate as OpenRLHF calls it: the next scripted turn, ended by the EOS token
    def __init__(self, tokenizer, turns):
        self.tokenizer, self.turns, self.prompts = tokenizer, turns, []

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.prompts.append(list(prompt_token_ids))
        text = self.turns[min(len(self.prompts), len(self.turns)) - 1]
        if "time.sleep" in text:  # a slow cell: the test cuts the connection while it runs
            print("CELL", flush=True)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        ids = ids + [self.tokenizer.eos_token_id]
        kept = ids[: sampling_params.max_tokens]
        shown = kept[:-1] if kept == ids else kept  # vLLM's text leaves out the stop token
        out = SimpleNamespace(token_ids=kept, text=self.tokenizer.decode(shown),
                              finish_reason="stop" if kept == ids else "length", logprobs=None)
        return SimpleNamespace(outputs=[out])


async def play(job, tokenizer):
    if "export_to" in job:  # the dataset rows, as a user makes them
        from analyst_env.trainers.openrlhf_agent import export_jsonl

        options = job.get("options") or {"seed": 5}
        path = export_jsonl(job["url"], job["export_to"], split="train", **options)
        return {"rows": [json.loads(line) for line in path.read_text().splitlines()]}
    os.environ.pop("ANALYST_ENV_URL", None)
    if job["url"]:
        os.environ["ANALYST_ENV_URL"] = job["url"]
    try:
        executor = openrlhf_loader()(job["agent_file"])
    except Exception as exc:
        return {"load_error": f"{type(exc).__name__}: {exc}"}
    engine = ScriptedEngine(tokenizer, job["turns"])
    params = SimpleNamespace(max_tokens=None, logprobs=None)
    try:
        out = await executor.execute(
            "ignored prompt", job["label"], params, job["max_length"], tokenizer, engine
        )
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    tokens, ranges = out["observation_tokens"], out["action_ranges"]
    gaps = [tokens[a[1]:b[0]] for a, b in zip(ranges, ranges[1:])]
    return {
        "reward": out["reward"], "scores": out["scores"], "logs": out["extra_logs"],
        "truncated": out["truncated"], "turns": len(ranges),
        "prompt": tokenizer.decode(tokens[: ranges[0][0]]),
        "actions": [tokenizer.decode(tokens[s:e]) for s, e in ranges],
        "feedback": [tokenizer.decode(g) for g in gaps],
        "executor": type(executor).__mro__[1].__name__,
    }


tokenizer = tiny_qwen3_tokenizer()
print("READY", flush=True)
for line in sys.stdin:  # one sample per line, its result on one line
    print("RESULT", json.dumps(asyncio.run(play(json.loads(line), tokenizer))), flush=True)
"""


def call(name: str, **arguments) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


class OpenRLHFWorker:
    """A Python with OpenRLHF and the tokenizer loaded, playing one sample per request.

    One process for the module: importing torch and transformers and building the tokenizer
    is most of the cost of a sample.
    """

    def __init__(self, log: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANALYST_ENV_")}
        env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO / "tests"))
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SCRIPT, str(PACKAGES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
            cwd="/",
            env=env,
        )
        assert self._line() == "READY"

    def _line(self) -> str:
        """The worker's next non-blank line (the tokenizer's trainer prints blank ones)."""
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the OpenRLHF worker died: {self.log.read_text()[-3000:]}"
            if line.strip():
                return line.strip()

    def play(
        self,
        label: str,
        turns: list[str],
        *,
        url: str | None,
        agent_file: Path = AGENT_FILE,
        max_length: int = 4096,
        cuts=(),
    ) -> dict:
        """OpenRLHF loads ``agent_file`` and plays one sample of ``label`` with the scripted
        turns; ``cuts`` are called, one per slow cell, while the cell runs on the server."""
        job = {"label": label, "turns": turns, "url": url, "agent_file": str(agent_file)}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({**job, "max_length": max_length}) + "\n")
        self.proc.stdin.flush()
        pending = list(cuts)
        while not (line := self._line()).startswith("RESULT "):  # OpenRLHF logs to stdout too
            if line == "CELL" and pending:
                later(0.4, pending.pop(0))
        return json.loads(line.removeprefix("RESULT "))

    def export(self, url: str, path: Path, **options) -> list[dict]:
        """The rows ``export_jsonl`` writes for the server's train split (``options``: its
        keyword arguments; default ``seed=5``)."""
        assert self.proc.stdin is not None
        job = {"url": url, "export_to": str(path), "options": options}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        while not (line := self._line()).startswith("RESULT "):
            pass
        return json.loads(line.removeprefix("RESULT "))["rows"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def openrlhf(tmp_path_factory):
    pytest.importorskip("trl", reason="the tiny Qwen3 tokenizer needs the 'trl' extra")
    if not (PACKAGES / "openrlhf").is_dir():
        pytest.skip(
            f"no OpenRLHF at {PACKAGES}: make it with .ci/run's command (pip install --no-deps "
            "--target .venv/openrlhf openrlhf==0.11.2 pylatexenc==2.10)"
        )
    worker = OpenRLHFWorker(tmp_path_factory.mktemp("openrlhf") / "stderr.log")
    yield worker
    worker.close()


def sessions_closed(server: str) -> bool:
    deadline = time.monotonic() + 30
    while httpx.get(f"{server}/ready", timeout=10).json()["live_sessions"]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_a_solved_episode_earns_the_servers_reward_with_templated_tool_turns(openrlhf, server):
    turns = [
        call("run_sql", query="SELECT SUM(amount) FROM 'sales.csv'"),
        call("final_answer", answer=ANSWER),
    ]
    out = openrlhf.play(json.dumps({"task_id": "tiny-csv", "seed": 2}), turns, url=server)
    assert out["executor"] == "AnalystAgentExecutor"
    assert (out["reward"], out["scores"], out["turns"]) == (1.0, 1.0, 2)
    assert out["logs"] == {"turns": 2, "tool_calls": 2, "malformed_calls": 0, "solved": 1.0}
    # the row's prompt is replaced by the task in the chat template, tools listed
    assert out["prompt"].startswith("<|im_start|>system\n") and "<tools>" in out["prompt"]
    assert "sales.csv" in out["prompt"] and out["prompt"].endswith("<|im_start|>assistant\n")
    # the model's turns are trained (ending with its end-of-turn token), the tool result is not
    assert out["actions"] == [t + "<|im_end|>" for t in turns]
    (feedback,) = out["feedback"]
    assert feedback.startswith("\n<|im_start|>user\n<tool_response>\n")
    assert ANSWER in feedback and feedback.endswith("<|im_start|>assistant\n")
    assert sessions_closed(server)


def test_exported_rows_name_their_episodes(openrlhf, server, tmp_path):
    rows = openrlhf.export(server, tmp_path / "data" / "train.jsonl")
    labels = {row["input"]: json.loads(row["label"]) for row in rows}
    assert labels["analyst_env task tiny-csv"] == {"task_id": "tiny-csv", "seed": 5}
    row = next(r for r in rows if "tiny-csv" in r["input"])
    out = openrlhf.play(row["label"], [call("final_answer", answer=ANSWER)], url=server)
    assert out["reward"] == 1.0


def test_curriculum_labels_play_the_servers_pick_one_task_a_group(openrlhf, tmp_path):
    """Labels from ``export_jsonl(client_id=...)`` against ``--curriculum``: a label's samples
    play the one task the server picked for its group, another label another task."""
    with curriculum_server(tmp_path, sessions=4) as url:
        rows = openrlhf.export(url, tmp_path / "rows.jsonl", client_id="orl-1", num_tasks=2)
        labels = [json.loads(row["label"]) for row in rows]
        assert [set(label) for label in labels] == [{"client_id", "curriculum_group"}] * 2
        wrong = [call("final_answer", answer="-1")]
        played = [
            openrlhf.play(row["label"], wrong, url=url) for row in (rows[0], rows[0], rows[1])
        ]
    assert [out["reward"] for out in played] == [0.0] * 3
    first, again, other = (out["prompt"] for out in played)
    assert first == again != other


def test_a_wrong_answer_scores_0_and_a_task_id_label_works(openrlhf, server):
    out = openrlhf.play("tiny-csv", [call("final_answer", answer="-1")], url=server)
    assert (out["reward"], out["turns"], out["logs"]["solved"]) == (0.0, 1, 0.0)


def test_broken_calls_are_answered_and_the_episode_goes_on(openrlhf, server):
    turns = ["<tool_call>{not json</tool_call>", call("no_such_tool")]
    turns.append(call("final_answer", answer=ANSWER))
    out = openrlhf.play("tiny-csv", turns, url=server)
    assert out["reward"] == 1.0 and out["logs"]["malformed_calls"] == 1
    assert "Error: invalid JSON" in out["feedback"][0] and "Error" in out["feedback"][1]


def test_a_turn_without_a_call_or_the_length_budget_ends_with_0_and_closes_the_session(
    openrlhf, server
):
    out = openrlhf.play("tiny-csv", ["I think it is 7319.25."], url=server)
    assert (out["reward"], out["turns"]) == (0.0, 1)
    long_cell = call("add_and_execute_code_cell", code="print(1)\n" * 400)
    out = openrlhf.play("tiny-csv", [long_cell], url=server, max_length=1200)
    assert out["truncated"] is True and out["reward"] == 0.0
    assert sessions_closed(server)


def test_a_subclass_file_names_several_replicas(openrlhf, server, tmp_path):
    agent = tmp_path / "analyst_agent.py"
    agent.write_text(
        "from analyst_env.trainers.openrlhf_agent import AnalystAgentExecutor\n\n\n"
        "class AgentExecutor(AnalystAgentExecutor):\n"
        f"    base_url = 'http://127.0.0.1:9,{server}'  # the first is down\n"
        "    max_turns = 1\n"
    )
    out = openrlhf.play(
        "tiny-csv",
        [call("list_files"), call("final_answer", answer=ANSWER)],
        url=None,
        agent_file=agent,
    )
    assert (out["reward"], out["turns"]) == (0.0, 1)  # max_turns ended it before the answer
    assert "sales.csv" in out["prompt"]


def test_a_missing_server_or_a_bad_label_fails_with_a_clear_error(openrlhf, server):
    out = openrlhf.play("tiny-csv", [], url=None)
    assert "ANALYST_ENV_URL" in out["load_error"]
    out = openrlhf.play('{"task": "tiny-csv"}', [call("list_files")], url=server)
    assert "unknown keys in the label: ['task']" in out["error"]
    assert sessions_closed(server)


def test_a_dropped_connection_resumes_the_episode_and_the_cell_runs_once(openrlhf, server):
    proxy = DroppingProxy(int(server.rsplit(":", 1)[1]))
    try:
        turns = [call("add_and_execute_code_cell", code=SLOW_CELL)] * 2
        turns.append(call("final_answer", answer=ANSWER))
        out = openrlhf.play("tiny-csv", turns, url=proxy.url(), cuts=[proxy.drop, proxy.partition])
    finally:
        proxy.close()
    assert proxy.connections >= 3  # the first, and at least one more after each cut
    assert out["reward"] == 1.0 and out["turns"] == 3
    printed = [f.split("<tool_response>\n", 1)[1].split("\n", 1)[0] for f in out["feedback"]]
    assert printed == ["1", "2"]  # each cell ran once, its output came back over the new link
    assert sessions_closed(server)
