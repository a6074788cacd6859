"""The CoreWeave fake answers the real ``cwsandbox`` SDK: create, exec with streamed
stdin, files written and read back, stop, and a wrong API key refused. The groundwork
for a ``coreweave`` backend (docs/coreweave-sdk.md); skipped where the ``coreweave``
extra is not installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("cwsandbox")

from tests.backends.fake_coreweave import FakeCoreWeave  # noqa: E402


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeCoreWeave]:
    server = FakeCoreWeave(api_key="test-key")
    monkeypatch.setenv("CWSANDBOX_BASE_URL", server.start())
    monkeypatch.setenv("CWSANDBOX_API_KEY", "test-key")
    yield server
    server.stop()


def test_the_sdk_runs_a_command_with_streamed_stdin(fake: FakeCoreWeave) -> None:
    import cwsandbox

    sandbox = cwsandbox.Sandbox.run(container_image="python:3.11", request_timeout_seconds=10)
    sandbox.wait(timeout=10)
    process = sandbox.exec(
        ["python3", "-c", "import sys; sys.stdout.write(sys.stdin.read()[::-1])"], stdin=True
    )
    process.stdin.write(b"frame-1\n").result()
    process.stdin.close().result()
    result = process.result()
    assert (result.returncode, result.stdout) == (0, "\n1-emarf")
    sandbox.write_file("/opt/runner/bundle.bin", b"\x00\xffbytes").result()
    assert sandbox.read_file("/opt/runner/bundle.bin").result() == b"\x00\xffbytes"
    listed = sandbox.exec(["cat", "opt/runner/bundle.bin"]).result()  # the exec's folder
    assert listed.returncode == 0
    sandbox.stop().result()
    assert fake.calls[:3] == ["CreateSandbox", "GetSandbox", "StreamExec"]
    assert "DeleteSandbox" in fake.calls and not fake.folders


def test_a_wrong_api_key_is_refused(fake: FakeCoreWeave, monkeypatch: pytest.MonkeyPatch) -> None:
    import cwsandbox

    monkeypatch.setenv("CWSANDBOX_API_KEY", "wrong")
    with pytest.raises(cwsandbox.exceptions.CWSandboxError):
        sandbox = cwsandbox.Sandbox.run(container_image="python:3.11", request_timeout_seconds=5)
        sandbox.wait(timeout=5)
    assert fake.sandboxes == {}
