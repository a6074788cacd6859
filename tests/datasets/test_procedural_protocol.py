"""``serve --dataset procedural:SEED`` through the real server: reset by index, id or seed;
oracle 1.0 and null 0.0 over the sandbox; bad requests refused while the server keeps serving; the
seed and the
generator out of the kernel's reach."""

import asyncio
import json

import httpx
import pytest
from support import procedural_server

from analyst_env.client import AnalystEnv
from analyst_env.evaluation.validation import validate

pytestmark = pytest.mark.live

SEED = 918273645


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    with procedural_server(tmp_path_factory.mktemp("procedural-cache"), SEED, 12) as live:
        yield live


def test_oracle_one_null_zero_on_every_split(served):
    url, runtime = served
    tasks = [
        runtime.select(task_id=None, split=s, index=i, seed=None)
        for s in ("train", "test", "ood")
        for i in range(4)
    ]
    rows = asyncio.run(validate(url, tasks, concurrency=4))
    bad = [r for r in rows if r["status"] != "pass"]
    assert not bad, [(r["task_id"], r.get("failures"), r.get("gold_status")) for r in bad[:3]]


def test_workbook_tasks_pass_the_full_check_over_the_sandbox(served):
    """One task of every workbook template: the oracle's cell saves a workbook scoring 1 in the
    sandbox, the null run scores 0, and no reference name or value reaches an episode."""
    from analyst_env.datasets.procedural.attempt_draw import peek
    from analyst_env.datasets.procedural.templates import load_all

    url, runtime = served
    wanted = {t.name for t in load_all() if t.category in ("excel-edit", "result-workbook")}
    tasks, index = {}, 0
    while wanted - set(tasks) and index < 3000:
        drawn = peek(SEED, "train", index)["template"]
        if drawn in wanted and drawn not in tasks:
            task = runtime.select(task_id=None, split="train", index=index, seed=None)
            if task.metadata["template"] == drawn:
                tasks[drawn] = task
        index += 1
    assert set(tasks) == wanted
    rows = asyncio.run(validate(url, list(tasks.values()), concurrency=4))
    bad = [r for r in rows if r["status"] != "pass"]
    assert not bad, [(r["task_id"], r.get("failures"), r.get("gold_status")) for r in bad[:3]]


def test_findings_oracle_scores_one_through_the_protocol(served):
    """Two written-finding tasks (rubric verifier): the oracle sentence scores 1 as a served
    final answer, the null run 0."""
    from analyst_env.datasets.procedural.attempt_draw import peek

    url, runtime = served
    tasks, index = [], 0
    while len(tasks) < 2 and index < 600:
        if peek(SEED, "train", index)["template"] == "finding_growth_leader":
            task = runtime.select(task_id=None, split="train", index=index, seed=None)
            if task.metadata["category"] == "findings":
                tasks.append(task)
        index += 1
    assert tasks and all(t.verifier.name == "rubric" for t in tasks)
    rows = asyncio.run(validate(url, tasks, concurrency=2))
    bad = [r for r in rows if r["status"] != "pass"]
    assert not bad, [(r["task_id"], r.get("failures"), r.get("gold_status")) for r in bad[:3]]


def test_chart_oracle_scores_one_through_the_protocol(served):
    """One chart task of each kind: the oracle cell, run in the sandbox's real kernel, saves an
    SVG the chart_figure scorer reads back as the gold series (1.0); the null run saves none
    (0.0). The kernel's own matplotlib settings keep the SVG's text as text."""
    from analyst_env.datasets.procedural.attempt_draw import peek

    url, runtime = served
    tasks: dict[str, object] = {}
    index = 0
    while len(tasks) < 4 and index < 1500:
        drawn = peek(SEED, "train", index)
        family = drawn["family"]
        if drawn["category"] == "charts" and family not in tasks:
            task = runtime.select(task_id=None, split="train", index=index, seed=None)
            if task.metadata["family"] == family:
                tasks[family] = task
        index += 1
    assert len(tasks) == 4 and all(t.verifier.name == "chart_figure" for t in tasks.values())
    rows = asyncio.run(validate(url, list(tasks.values()), concurrency=2))
    bad = [r for r in rows if r["status"] != "pass"]
    assert not bad, [(r["task_id"], r.get("failures"), r.get("gold_status")) for r in bad[:3]]


async def _reset_by_index(url):
    async with AnalystEnv(base_url=url, message_timeout_s=120) as env:
        first = await env.reset(split="test", index=123456789012)
        again = await env.reset(task_id=first.observation.task_id)
        drawn = await env.reset(seed=5)
        return first.observation, again.observation, drawn.observation


def test_reset_by_huge_index_by_id_and_by_seed(served):
    url, _ = served
    first, again, drawn = asyncio.run(_reset_by_index(url))
    assert first.task_id == "procedural-test-123456789012"
    assert again.instruction == first.instruction
    assert drawn.task_id.startswith("procedural-")


async def _bad_then_good(url):
    errors = []
    async with AnalystEnv(base_url=url, message_timeout_s=120) as env:
        for kwargs in (
            {"split": "train", "index": 2**40},
            {"task_id": "procedural-train-007"},
            {"split": "dev", "index": 0},
        ):
            try:
                await env.reset(**kwargs)
            except Exception as exc:  # the server refuses; the session stays usable
                errors.append(str(exc))
        ok = await env.reset(split="train", index=1)
        return errors, ok.observation.task_id


def test_bad_resets_are_refused_and_the_session_goes_on(served):
    url, _ = served
    errors, task_id = asyncio.run(_bad_then_good(url))
    assert len(errors) == 3
    assert task_id == "procedural-train-1"


def test_task_api_pages_an_unbounded_split(served):
    url, _ = served
    with httpx.Client(base_url=url, timeout=60) as http:
        name = http.get("/list_environments").json()[0]
        assert http.post(f"/{name}/num_tasks", json={"split": "train"}).json()["num_tasks"] == 2**40
        page = http.post(
            f"/{name}/task_range", json={"split": "train", "start": 10, "stop": 13}
        ).json()
        assert [t["id"] for t in page["tasks"]] == [f"procedural-train-{i}" for i in (10, 11, 12)]
        assert "answer" not in page["tasks"][0]
        assert (
            http.post(
                f"/{name}/task_range", json={"split": "train", "start": 0, "stop": 10**6}
            ).status_code
            == 400
        )
        assert http.post(f"/{name}/tasks", json={"split": "train"}).status_code == 400
        assert http.get("/health").status_code == 200


PROBE = r"""
import json, os, sys
seed = %(seed)r
found = {"env": [k for k, v in os.environ.items() if seed in v or seed in k]}
hits = []
for root in [os.getcwd(), "/tmp"]:
    for dirpath, dirs, names in os.walk(root):
        for n in names:
            try:
                with open(os.path.join(dirpath, n), "rb") as fh:
                    if seed.encode() in fh.read(10_000_000):
                        hits.append(os.path.join(dirpath, n))
            except OSError:
                pass
found["files"] = hits
try:
    import analyst_env.datasets.procedural.generator
    found["generator"] = "imported"
except BaseException as exc:
    found["generator"] = "refused " + type(exc).__name__
try:
    found["cache"] = os.listdir(%(cache)r)
except OSError as exc:
    found["cache"] = "refused " + type(exc).__name__
print(json.dumps(found))
"""


async def _probe(url, cache):
    async with AnalystEnv(base_url=url, message_timeout_s=120) as env:
        await env.reset(split="train", index=3)
        out = await env.add_and_execute_code_cell(PROBE % {"seed": str(SEED), "cache": cache})
        return json.loads(out.observation.text.strip().splitlines()[-1])


def test_kernel_sees_neither_the_seed_nor_the_generator(served):
    url, runtime = served
    cache = str(runtime.unbounded[0].root.parent)
    found = asyncio.run(_probe(url, cache))
    assert found["env"] == []
    assert found["files"] == []
    assert found["generator"].startswith("refused")
    assert found["cache"] in ([],) or str(found["cache"]).startswith("refused")
