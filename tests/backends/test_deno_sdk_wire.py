"""What the real deno-sandbox SDK does over the wire, checked against tests/backends/fake_deno.py.

The `deno` backend (envs/remote/deno_backend.py, deno_link.py) rests on two facts pinned
here, so an SDK upgrade that changes them fails here loudly:
1. `spawn(..., stdin_data=<open async generator>)` does not return until the generator ends, so
   a long-lived runner cannot be fed through its stdin with the public API;
2. the public path does work: a runner spawned without stdin (spawn returns at once, stdout is a
   public StreamReader) that reads a FIFO, fed one frame per `spawn("sh", ... cat >> fifo)`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

import pytest

deno_sandbox = pytest.importorskip("deno_sandbox")

from fake_deno import FakeDeno  # noqa: E402


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeDeno]:
    yield FakeDeno().start()


@pytest.fixture
def deploy(fake: FakeDeno, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("DENO_SANDBOX_ENDPOINT", fake.endpoint)
    monkeypatch.setenv("DENO_DEPLOY_TOKEN", fake.token)
    return deno_sandbox.AsyncDenoDeploy()


def test_open_stdin_keeps_spawn_from_returning(deploy: object) -> None:
    async def run() -> None:
        release = asyncio.Event()

        async def stdin() -> AsyncIterator[bytes]:
            yield b"hello\n"
            await release.wait()

        async with deploy.sandbox.create(memory_mb=512) as sb:  # type: ignore[attr-defined]
            spawning = asyncio.ensure_future(sb.spawn("cat", stdout="piped", stdin_data=stdin()))
            await asyncio.sleep(0.5)
            assert not spawning.done(), "SDK changed: spawn returns while stdin is open; use it"
            release.set()
            proc = await asyncio.wait_for(spawning, 5)
            assert (await asyncio.wait_for(proc.wait(), 5))["success"], "runner"

    asyncio.run(run())


def test_fifo_runner_answers_frames_through_public_calls(
    deploy: object, fake: FakeDeno, tmp_path: object
) -> None:
    fifo = f"{tmp_path}/in.fifo"
    runner = (
        "import json,os,sys\n"
        f"os.mkfifo({fifo!r})\nprint('ready',flush=True)\n"
        # the runner holds its own write end, so the FIFO never reads EOF between frames
        f"for line in os.fdopen(os.open({fifo!r}, os.O_RDWR)):\n"
        "    req=json.loads(line)\n"
        "    print(json.dumps({'id':req['id'],'value':eval(req['code'])}),flush=True)\n"
        "    if req['code']=='None': break\n"
    )

    async def run() -> list[dict[str, object]]:
        async with deploy.sandbox.create(memory_mb=512, allow_net=[]) as sb:  # type: ignore[attr-defined]
            proc = await asyncio.wait_for(
                sb.spawn("python3", args=["-u", "-c", runner], stdout="piped"), 5
            )
            assert (await asyncio.wait_for(proc.stdout.readline(), 5)).strip() == b"ready"
            answers = []
            for n, code in enumerate(["6*7", "sum(range(10))", "None"]):
                frame = json.dumps({"id": n, "code": code}).encode() + b"\n"
                writer = await sb.spawn("sh", args=["-c", f"cat >> {fifo}"], stdin_data=[frame])
                assert (await asyncio.wait_for(writer.wait(), 5))["success"], "writer"
                answers.append(json.loads(await asyncio.wait_for(proc.stdout.readline(), 5)))
            assert (await asyncio.wait_for(proc.wait(), 5))["success"], "runner"
            return answers

    answers = asyncio.run(run())
    assert answers == [{"id": 0, "value": 42}, {"id": 1, "value": 45}, {"id": 2, "value": None}]
    assert fake.created[-1]["memory_mb"] == 512 and fake.created[-1]["allow_net"] == []


def test_wrong_token_is_refused_at_create(fake: FakeDeno, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DENO_SANDBOX_ENDPOINT", fake.endpoint)
    monkeypatch.setenv("DENO_DEPLOY_TOKEN", "not-the-token")

    async def run() -> None:
        async with deno_sandbox.AsyncDenoDeploy().sandbox.create():
            pass

    with pytest.raises(Exception, match="invalid API token"):
        asyncio.run(run())
