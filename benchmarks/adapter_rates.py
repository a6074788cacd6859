"""Episodes per second each trainer adapter sustains against one server, beside the typed client.

::

    python -m analyst_env.benchmarks.adapter_rates [--episodes 96] [--concurrency 8] [--json]

starts a server (``analyst-env serve`` on the starter set, one worker) and the no-op
policy (:mod:`analyst_env.benchmarks.noop_policy`), then plays the same number of
no-op episodes (reset + one ``final_answer``) through each adapter in its own
interpreter (:mod:`analyst_env.benchmarks.adapter_drivers`), the typed client first
and last. An adapter's figure is its rate as a ratio to the mean of the two client
runs: what the adapter adds per episode on top of the protocol, with the server's and
the machine's speed divided out. An adapter whose venv is absent (ART, HUD and veRL
have their own, made by ``.ci/run``) is reported as not measured, with the path looked for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from analyst_env.benchmarks.noop_policy import NoopPolicy
from analyst_env.benchmarks.servers import analyst_server
from analyst_env.benchmarks.tiny_tokenizer import save_tiny_qwen3

ROOT = Path(__file__).resolve().parents[1]
ADAPTERS = ["trl", "skyrl", "openrlhf", "verl", "art", "hud"]
OPENRLHF = Path(os.environ.get("ANALYST_ENV_OPENRLHF_PATH", ROOT / ".venv" / "openrlhf"))
"""OpenRLHF's wheel, installed without its GPU dependencies into a folder (.ci/run)."""


def interpreters() -> dict[str, Path]:
    """The interpreter each adapter runs in (``ANALYST_ENV_<NAME>_PYTHON`` overrides)."""
    own = Path(sys.executable)
    venvs = {name: ROOT / ".venv" / name for name in ("art", "hud", "verl")}
    found = {"client": own, "trl": own, "skyrl": own, "openrlhf": own}
    for name, venv in venvs.items():
        found[name] = Path(
            os.environ.get(f"ANALYST_ENV_{name.upper()}_PYTHON", venv / "bin/python")
        )
    return found


def missing_part(name: str, python: Path) -> str | None:
    """Why ``name`` cannot be measured here (its interpreter or packages absent), or None."""
    if not python.exists():
        return f"no interpreter at {python} (see .ci/run)"
    if name == "openrlhf" and not (OPENRLHF / "openrlhf").is_dir():
        return f"no OpenRLHF packages at {OPENRLHF} (see .ci/run)"
    return None


def _drive(
    python: Path, name: str, server: str, policy: str, episodes: int, conc: int, extra: dict
) -> dict:
    """One adapter's run, in its interpreter: the driver's JSON line, or the reason it failed."""
    argv = [str(python), "-m", "analyst_env.benchmarks.adapter_drivers", name, server, policy]
    env = dict(os.environ, HUD_TELEMETRY_ENABLED="false", HUD_API_KEY="", WANDB_MODE="disabled")
    env.update(extra)
    env.setdefault("ANALYST_ENV_OPENRLHF_PATH", str(OPENRLHF))
    proc = subprocess.run(
        [*argv, str(episodes), str(conc)],
        capture_output=True,
        text=True,
        cwd="/",
        env=env,
        timeout=900,
    )
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]}
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["rate"] = result["episodes"] / result["seconds"]
    return result


def measure(episodes: int, concurrency: int, adapters: list[str]) -> dict[str, Any]:
    """Every adapter's rate and ratio to the client, from one server and one policy."""
    pythons = interpreters()
    results: dict[str, Any] = {}
    sessions = max(64, 4 * concurrency)
    with (
        analyst_server(sessions) as server,
        NoopPolicy() as policy,
        tempfile.TemporaryDirectory() as model_dir,
    ):
        if "verl" in adapters and not missing_part("verl", pythons["verl"]):
            # veRL loads a model folder (tokenizer and config); made here, where TRL's chat
            # template is installed
            save_tiny_qwen3(Path(model_dir))
        model = {"ANALYST_ENV_BENCH_MODEL_DIR": model_dir}
        # a discarded client run first: the server's first sessions pay for its warm-up
        _drive(pythons["client"], "client", server.url, policy, episodes, concurrency, model)
        order = ["client", *[a for a in adapters if a != "client"], "client"]
        client_rates = []
        for name in order:
            python = pythons[name]
            missing = missing_part(name, python)
            if missing:
                results[name] = {"error": missing}
                continue
            run = _drive(python, name, server.url, policy, episodes, concurrency, model)
            if name == "client" and "rate" in run:
                client_rates.append(run["rate"])
            results.setdefault(name, run)
    baseline = sum(client_rates) / len(client_rates) if client_rates else None
    if baseline and "rate" in results.get("client", {}):
        results["client"]["rate"] = baseline  # the mean of the runs before and after
    for run in results.values():
        if "rate" in run and baseline:
            run["ratio"] = run["rate"] / baseline
    return {
        "episodes": episodes,
        "concurrency": concurrency,
        "client_rates": client_rates,
        "adapters": results,
    }


def format_markdown(report: dict[str, Any]) -> str:
    """The report as the table BENCHMARKS.md carries."""
    lines = [
        f"{report['episodes']} no-op episodes per adapter, {report['concurrency']} at a time; "
        "client runs: " + ", ".join(f"{r:.1f}/s" for r in report["client_rates"]),
        "",
        "| adapter | episodes/s | x typed client | ended by the server |",
        "|---|---|---|---|",
    ]
    for name, run in report["adapters"].items():
        if "rate" in run:
            lines.append(
                f"| {name} | {run['rate']:.1f} | {run.get('ratio', 0):.2f} | "
                f"{run['ended']}/{run['episodes']} |"
            )
        else:
            lines.append(f"| {name} | not measured: {run['error']} | | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=96, help="Episodes per adapter (96)")
    parser.add_argument("--concurrency", type=int, default=8, help="Episodes at a time (8)")
    parser.add_argument(
        "--adapters", default=",".join(ADAPTERS), help="Which, comma-separated (all)"
    )
    parser.add_argument("--json", action="store_true", help="Print the report as JSON")
    args = parser.parse_args(argv)
    report = measure(args.episodes, args.concurrency, args.adapters.split(","))
    print(json.dumps(report, indent=1) if args.json else format_markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
