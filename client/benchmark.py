"""``analyst-env bench``: latency and throughput of the server, measured over the wire.

Each figure is what a trainer sees: a raw WebSocket client sending OpenEnv
frames to a real server on loopback. Reported as median and p90 in
milliseconds (the machine is noisy; compare ratios, not absolute values).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from typing import Any

import httpx
import websockets


def _quantiles(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {"n": len(ordered), "median_ms": statistics.median(ordered), "p90_ms": p90}


def _step(tool: str, **arguments: Any) -> str:
    return json.dumps({"type": "step", "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments}})


async def _timed(ws, message: str) -> tuple[float, dict]:
    start = time.perf_counter()
    await ws.send(message)
    reply = json.loads(await ws.recv())
    if reply.get("type") == "error":
        raise RuntimeError(f"server error: {reply['data']}")
    return (time.perf_counter() - start) * 1000, reply


async def run_benchmark(base_url: str, task_id: str, n: int = 100, sessions: int = 8, headers: dict | None = None) -> dict[str, Any]:
    """Measure per-frame latencies on one session, then throughput with ``sessions`` at once."""
    ws_url = base_url.replace("http", "ws", 1) + "/ws"
    reset = json.dumps({"type": "reset", "data": {"task_id": task_id}})
    results: dict[str, Any] = {}
    async with websockets.connect(ws_url, max_size=None, additional_headers=headers) as ws:
        await _timed(ws, reset)
        cases = {
            "reset (new sandbox)": reset,
            "step: cell `1+1`": _step("add_and_execute_code_cell", code="1+1"),
            "step: list_tools": json.dumps({"type": "step", "data": {"type": "list_tools"}}),
            "step: run_sql `SELECT 1`": _step("run_sql", query="SELECT 1"),
            "step: list_files": _step("list_files"),
            "state frame": json.dumps({"type": "state"}),
        }
        for name, message in cases.items():
            samples = []
            for i in range(n):
                if name != "reset (new sandbox)" and i % 30 == 29:
                    await _timed(ws, reset)  # stay below the step limit
                samples.append((await _timed(ws, message))[0])
            results[name] = _quantiles(samples)
        await _timed(ws, reset)
        await _timed(ws, _step("add_and_execute_code_cell", code="import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(1000, 5))"))
        samples = []
        for i in range(max(10, n // 5)):
            if i % 30 == 29:
                await _timed(ws, reset)
                await _timed(ws, _step("add_and_execute_code_cell", code="import numpy as np, pandas as pd\ndf = pd.DataFrame(np.random.rand(1000, 5))"))
            samples.append((await _timed(ws, _step("add_and_execute_code_cell", code="df.describe()")))[0])
        results["step: cell `df.describe()`"] = _quantiles(samples)

    connect_samples = []
    for _ in range(max(10, n // 5)):
        start = time.perf_counter()
        async with websockets.connect(ws_url, max_size=None, additional_headers=headers) as ws:
            await _timed(ws, reset)
        connect_samples.append((time.perf_counter() - start) * 1000)
    results["new WebSocket + session + reset"] = _quantiles(connect_samples)

    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
        def rpc(method: str, params: dict) -> dict:
            return {"jsonrpc": "2.0", "method": method, "params": params, "id": 1}

        sid = (await http.post("/mcp", json=rpc("openenv/session/create", {}))).json()["result"]["session_id"]
        async with websockets.connect(f"{ws_url}?session_id={sid}", max_size=None, additional_headers=headers) as ws:
            await _timed(ws, reset)
            samples = []
            for i in range(n):
                if i % 30 == 29:
                    await _timed(ws, reset)
                start = time.perf_counter()
                await http.post("/mcp", json=rpc("tools/call", {"name": "add_and_execute_code_cell", "arguments": {"code": "1+1"}, "session_id": sid}))
                samples.append((time.perf_counter() - start) * 1000)
            results["/mcp tools/call: cell `1+1`"] = _quantiles(samples)
        await http.post("/mcp", json=rpc("openenv/session/close", {"session_id": sid}))

    async def worker(steps: int) -> None:
        async with websockets.connect(ws_url, max_size=None, additional_headers=headers) as ws:
            await _timed(ws, reset)
            for i in range(steps):
                if i % 30 == 29:
                    await _timed(ws, reset)
                await _timed(ws, _step("add_and_execute_code_cell", code="1+1"))

    steps = max(20, n // 2)
    start = time.perf_counter()
    await asyncio.gather(*(worker(steps) for _ in range(sessions)))
    elapsed = time.perf_counter() - start
    results[f"throughput: {sessions} sessions x {steps} cells"] = {"steps_per_s": sessions * steps / elapsed}
    return results


def format_markdown(results: dict[str, Any]) -> str:
    lines = ["| what | n | median ms | p90 ms |", "|---|---|---|---|"]
    for name, r in results.items():
        if "steps_per_s" in r:
            lines.append(f"| {name} | | {r['steps_per_s']:.0f} steps/s | |")
        else:
            lines.append(f"| {name} | {r['n']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} |")
    return "\n".join(lines)
