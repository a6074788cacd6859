"""The JSON routes behind /web and the live hub: no ground truth, bounded reads, clear errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import websockets.sync.client as ws_client
from webui_support import starter_task

from analyst_env.client import AnalystEnv
from analyst_env.server import live
from analyst_env.server.live import LiveHub
from analyst_env.server.web.previews import head_preview
from analyst_env.server.web.replay import TrajectoryNotFound, list_trajectories, load_trajectory

GROUND_TRUTH_KEYS = {"answer", "oracle_answer", "oracle_steps", "verifier", "verify", "reference"}


def _keys(value) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.live
def test_task_routes_show_no_ground_truth(web_url):
    listing = httpx.get(f"{web_url}/web/api/tasks").json()["tasks"]
    assert len(listing) > 300 and not _keys(listing) & GROUND_TRUTH_KEYS
    for kind in ("csv", "sqlite", "excel"):
        task = starter_task(kind)
        detail = httpx.get(f"{web_url}/web/api/tasks/{task.id}").json()
        assert detail["instruction"] == task.instruction
        assert not _keys(detail) & GROUND_TRUTH_KEYS
        assert task.oracle_answer not in json.dumps(detail)


@pytest.mark.live
def test_file_preview_reads_only_the_tasks_own_files(web_url):
    task = starter_task("sqlite")
    name = sorted(task.files)[0]
    ok = httpx.get(f"{web_url}/web/api/tasks/{task.id}/files/{name}?rows=3").json()
    assert ok["kind"] == "sqlite" and all(len(t["rows"]) <= 3 for t in ok["tables"])
    for bad in ("../../../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd", "/etc/passwd", "other.csv"):
        r = httpx.get(f"{web_url}/web/api/tasks/{task.id}/files/{bad}")
        assert r.status_code == 404, bad
        assert "root:" not in r.text
    assert httpx.get(f"{web_url}/web/api/tasks/{task.id}/files/{name}?rows=5000").status_code == 422
    r = httpx.get(f"{web_url}/web/api/tasks/nope/files/x.csv")
    assert r.status_code == 404 and "unknown task_id" in r.json()["detail"]


def test_head_preview_is_bounded_and_never_raises(tmp_path):
    csv = tmp_path / "wide.csv"
    csv.write_text("a,b\n" + "".join(f"{i},{'x' * 500}\n" for i in range(100)))
    p = head_preview("wide.csv", str(csv), rows=1000)
    assert p["columns"] == ["a", "b"] and len(p["rows"]) == 50
    assert len(p["rows"][0][1]) == 201  # cut at 200 characters plus an ellipsis
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"not a database at all" * 10)
    assert "error" in head_preview("broken.sqlite", str(broken))
    assert "error" in head_preview("missing.xlsx", str(tmp_path / "missing.xlsx"))
    assert head_preview("blob.bin", str(csv))["note"] == "no preview for this file type"


@pytest.mark.live
def test_trajectory_routes(web_url, web_state_dir):
    task = starter_task("csv")
    episode_id = f"api-{uuid.uuid4().hex[:10]}"
    with AnalystEnv(base_url=web_url).sync() as env:
        env.reset(task_id=task.id, episode_id=episode_id)
        env.add_and_execute_code_cell("print(6 * 7)")
        env.final_answer(task.oracle_answer)
    listing = httpx.get(f"{web_url}/web/api/trajectories", params={"q": episode_id}).json()
    assert listing["total"] == 1
    (summary,) = listing["trajectories"]
    assert summary["status"] == "ended" and summary["reward"] == 1.0 and summary["steps"] == 2
    records = httpx.get(f"{web_url}/web/api/trajectories/{summary['name']}").json()["records"]
    assert [r["type"] for r in records] == ["reset", "step", "step", "end"]
    assert records[1]["cell"]["stdout"] == "42\n" and records[1]["duration_s"] > 0
    for bad in ("..%2F..%2Fetc%2Fpasswd", "nope.jsonl", "x" * 300 + ".jsonl"):
        assert httpx.get(f"{web_url}/web/api/trajectories/{bad}").status_code == 404
    with pytest.raises(TrajectoryNotFound):
        load_trajectory(web_state_dir, "../trajectories/" + summary["name"])


def test_replays_filter_by_outcome_origin_and_run_and_page(web_url):
    task = starter_task("csv")
    tag = uuid.uuid4().hex[:8]
    ids = {"solved": f"api-{tag}-a", "failed": f"eval-run{tag}-{task.id}-s0", "left": f"web-{tag}"}
    for outcome, episode_id in ids.items():
        with AnalystEnv(base_url=web_url).sync() as env:
            env.reset(task_id=task.id, episode_id=episode_id)
            if outcome == "solved":
                env.final_answer(task.oracle_answer)
            elif outcome == "failed":
                env.final_answer("not the answer")

    def listing(**params):
        reply = httpx.get(f"{web_url}/web/api/trajectories", params={"q": tag, **params})
        assert reply.status_code == 200, reply.text
        return [t["episode_id"] for t in reply.json()["trajectories"]]

    assert listing(outcome="solved") == [ids["solved"]]
    assert listing(outcome="failed") == [ids["failed"]]
    assert listing(origin="eval") == [ids["failed"]] == listing(run=f"run{tag}")
    assert listing(origin="trainer") == [ids["solved"]]
    # Newest first, one per page: three pages, then nothing.
    pages = [listing(limit=1, offset=i) for i in range(4)]
    assert pages[:3] == [[ids["left"]], [ids["failed"]], [ids["solved"]]] and pages[3] == []
    bad = httpx.get(f"{web_url}/web/api/trajectories", params={"outcome": "great"})
    assert bad.status_code == 422 and "solved" in bad.text  # the allowed values, listed


def test_trajectory_listing_survives_torn_and_foreign_files(tmp_path):
    root = tmp_path / "trajectories"
    root.mkdir()
    (root / "20260101T000000000000Z-a.jsonl").write_text(
        json.dumps({"type": "reset", "t": 1, "episode_id": "a", "task_id": "t"})
        + "\n"
        + json.dumps(
            {"type": "end", "t": 3, "reward": 0.5, "end_reason": "final_answer", "step_count": 2}
        )
        + "\n"
    )
    (root / "20260102T000000000000Z-b.jsonl").write_text(
        json.dumps({"type": "reset", "t": 5, "episode_id": "b", "task_id": "u"}) + '\n{"type": "st'
    )
    (root / "20260103T000000000000Z-c.jsonl").write_text("garbage\n")
    (root / "notes.txt").write_text("not a trajectory")
    listing = list_trajectories(tmp_path)
    assert [t["episode_id"] for t in listing["trajectories"]] == ["b", "a"]
    assert listing["trajectories"][0]["status"] == "running"
    assert listing["trajectories"][1]["reward"] == 0.5
    assert list_trajectories(tmp_path, query="u")["total"] == 1
    assert list_trajectories(tmp_path / "absent")["total"] == 0


def test_trajectory_pages_read_only_their_own_files(tmp_path, monkeypatch):
    from analyst_env.server.web import replay

    root = tmp_path / "trajectories"
    root.mkdir()
    for i in range(6):
        (root / f"2026010{i}T000000000000Z-e{i}.jsonl").write_text(
            json.dumps({"type": "reset", "t": i, "episode_id": f"e{i}", "task_id": "t"}) + "\n"
        )
    read = []
    real = replay._summary
    monkeypatch.setattr(replay, "_summary", lambda path: read.append(path.name) or real(path))
    page = list_trajectories(tmp_path, limit=2, offset=1)
    assert [t["episode_id"] for t in page["trajectories"]] == [
        "e4",
        "e3",
    ]  # newest first, one skipped
    assert page["total"] == 6 and len(read) == 2


@pytest.mark.live
def test_live_feed_of_a_session_replays_history_then_streams(web_url):
    task = starter_task("csv")
    episode_id = f"feed-{uuid.uuid4().hex[:10]}"
    base = web_url.replace("http://", "ws://")
    with AnalystEnv(base_url=web_url).sync() as env:
        env.reset(task_id=task.id, episode_id=episode_id)
        env.add_and_execute_code_cell("1 + 1")
        sessions = httpx.get(f"{web_url}/web/api/live").json()["sessions"]
        (mine,) = [s for s in sessions if s["episode_id"] == episode_id]
        assert mine["origin"] == "client" and mine["step_count"] == 1 and not mine["closed"]
        with ws_client.connect(f"{base}/web/api/live/ws?session={mine['session_id']}") as feed:
            history = json.loads(feed.recv(timeout=10))
            assert history["type"] == "history"
            assert [e["type"] for e in history["events"]] == ["reset", "step"]
            assert history["events"][1]["cell"]["outputs"] == [{"text/plain": "2"}]
            assert "available_tools" not in history["events"][0]["observation"]
            env.add_and_execute_code_cell(
                "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"
            )
            event = json.loads(feed.recv(timeout=30))
            while event["type"] == "ping":
                event = json.loads(feed.recv(timeout=30))
            assert event["type"] == "event" and event["event"]["seq"] == 3
            assert "image/png" in event["event"]["cell"]["outputs"][0]
            blocks = event["event"]["observation"]["result"]["content"]
            assert {
                "type": "image",
                "omitted": True,
            } in blocks  # the plot travels once, in the cell
            feed.send("viewers cannot send anything that matters")
            env.final_answer("not the answer")
            event = json.loads(feed.recv(timeout=30))
            assert event["event"]["done"] and event["event"]["reward"] == 0.0
    with ws_client.connect(f"{base}/web/api/live/ws?session=s-nope") as feed:
        reply = json.loads(feed.recv(timeout=10))
        assert reply["type"] == "error" and "no live session" in reply["message"]


@pytest.mark.live
def test_sessions_driven_over_mcp_are_live_too(web_url):
    from openenv.core import MCPToolClient

    task = starter_task("csv")
    episode_id = f"mcp-{uuid.uuid4().hex[:10]}"

    async def episode():
        async with MCPToolClient(base_url=web_url) as env:
            await env.reset(task_id=task.id, episode_id=episode_id)
            await env.call_tool("add_and_execute_code_cell", code="print('over mcp')")
            sessions = httpx.get(f"{web_url}/web/api/live").json()["sessions"]
            (mine,) = [s for s in sessions if s["episode_id"] == episode_id]
            assert mine["step_count"] == 1 and not mine["closed"]
            base = web_url.replace("http://", "ws://")
            with ws_client.connect(f"{base}/web/api/live/ws?session={mine['session_id']}") as feed:
                step = json.loads(feed.recv(timeout=10))["events"][1]
            assert step["action"]["via"] == "mcp" and step["cell"]["stdout"] == "over mcp\n"

    # Its own thread: Playwright's sync API keeps an event loop running on the main thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, episode()).result(timeout=120)


class _Episode:
    def __init__(self, episode_id: str) -> None:
        self.episode_id = episode_id
        self.task = type("T", (), {"id": "t1", "instruction": "do it"})()
        self.done, self.reward, self.end_reason, self.step_count, self.cells = (
            False,
            None,
            None,
            0,
            [],
        )


def test_hub_keeps_history_drops_slow_viewers_and_trims_finished_sessions(monkeypatch):
    async def scenario():
        hub = LiveHub()
        sid = hub.new_session_id()
        episode = _Episode("web-1")
        hub.reset(sid, episode, {"episode_id": "web-1"})
        listing, snapshot = hub.subscribe()
        assert [s["origin"] for s in snapshot["sessions"]] == ["web"]
        viewer, snap = hub.subscribe(sid)
        assert [e["type"] for e in snap["events"]] == ["reset"]

        episode.step_count, episode.cells = 1, ["cell-0"]
        hub.step(sid, episode, {"tool_name": "x", "arguments": {}}, {"ok": True}, None, 0.0)
        item = await asyncio.wait_for(viewer.queue.get(), 2)
        assert item["event"]["cell"] == "cell-0" and item["event"]["seq"] == 2
        assert (
            listing.resolve(await asyncio.wait_for(listing.queue.get(), 2))["session"]["step_count"]
            == 1
        )

        # A viewer that never reads is dropped (it gets None), and the episode never waits for it.
        monkeypatch.setattr(live, "QUEUE_SIZE", 2)
        slow, _ = hub.subscribe(sid)
        for i in range(5):
            episode.step_count = 2 + i
            hub.step(sid, episode, {"tool_name": "x", "arguments": {}}, {}, "cell-0", 0.0)
        await asyncio.sleep(0.05)
        assert slow.dropped and slow.queue.get_nowait() is None
        # The list viewer, also not reading, was never at risk: its updates were coalesced into one.
        assert listing.queue.qsize() == 1 and not listing.dropped
        assert listing.resolve(listing.queue.get_nowait())["session"]["step_count"] == 6

        # Only the newest finished sessions are kept.
        monkeypatch.setattr(live, "KEEP_FINISHED", 2)
        hub.close(sid)
        for n in range(4):
            other = hub.new_session_id()
            hub.reset(other, _Episode(f"e{n}"), {})
            hub.close(other)
        assert [s["episode_id"] for s in hub.sessions()] == ["e3", "e2"]
        hub.unsubscribe(listing)
        hub.unsubscribe(viewer)

    # Its own thread: Playwright's sync API keeps an event loop running on the main thread.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario()).result(timeout=30)


def test_one_hub_per_runtime_shared_by_its_sessions(settings, runtime, tiny_dataset):
    from analyst_env.server.environment import AnalystEnvironment
    from analyst_env.server.runtime import Runtime

    other = Runtime(settings, backend=runtime.backend, datasets=[tiny_dataset])
    first, second = AnalystEnvironment(runtime), AnalystEnvironment(runtime)
    try:
        assert first._live is second._live is runtime.live
        assert other.live is not runtime.live and other.metrics is not runtime.metrics
    finally:
        first.close()
        second.close()


def test_hub_numbers_keep_rising_when_a_session_starts_another_episode():
    hub = LiveHub()
    sid = hub.new_session_id()
    hub.reset(sid, _Episode("first"), {})
    hub.close(sid)
    hub.reset(sid, _Episode("second"), {})
    (summary,) = hub.sessions()
    assert summary["episode_id"] == "second" and not summary["closed"]
    assert (
        hub._sessions[sid].events[0]["seq"] == 3
    )  # after the first episode's reset (1) and close (2)
