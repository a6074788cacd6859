"""``analyst-env eval`` and ``validate``: the commands that play tasks.

``eval`` plays a model (or the oracle or null policy) over a dataset and writes a
report, an HTML page and a resumable run log; ``validate`` checks that every task
of a dataset is sound (the oracle scores 1, the null policy 0, twice alike, no gold
leaks). Both drive the client side against a server, ``--url`` or one started
in-process; ``cli.build_parser`` registers them with :func:`add_eval_parsers`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from analyst_env.cli_checks import (
    DATASET_HELP,
    USAGE_STATUS,
    UsageError,
    check_dataset,
    check_output_file,
    check_server,
    error_line,
    settings_from_args,
)


def cmd_eval(args: argparse.Namespace) -> int:
    """``eval``: a model (or the oracle/null policy) over a dataset; report, HTML and run log."""
    from tqdm import tqdm

    from analyst_env.datasets import load_dataset
    from analyst_env.evaluation.chat_client import ChatError
    from analyst_env.evaluation.run import EvalSettings, run_eval, select_tasks
    from analyst_env.run_records.run_log import RunMismatch, runs_dir

    check_dataset(args.dataset)
    served = settings_from_args(args)
    settings = EvalSettings(
        dataset=args.dataset,
        policy=args.policy,
        model=args.model,
        model_url=args.model_url,
        api_key_env=args.api_key_env,
        tool_format=args.tool_format,
        samples=args.samples,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        seed=args.seed,
        max_turns=args.max_turns,
        token_budget=args.token_budget,
        split=args.split,
        limit=args.limit,
        concurrency=args.concurrency,
        request_timeout_s=args.request_timeout,
        retries=args.retries,
        retry_backoff_s=args.retry_backoff,
        run_name=args.run_name,
        fresh=args.fresh,
        include_quarantined=args.include_quarantined,
        runs_dir=args.runs_dir or str(runs_dir(served.state_dir)),
    )
    try:
        settings.check()
        dataset = load_dataset(args.dataset)
        if dataset.unbounded:
            raise ValueError(
                f"{args.dataset!r} is unbounded; freeze a range first "
                "(analyst-env generate ... --out DIR) and evaluate tasks:DIR"
            )
        tasks = select_tasks(dataset.tasks, args.split, args.limit, args.include_quarantined)
    except (ValueError, OSError) as exc:
        raise UsageError(exc) from None
    check_output_file(args.json)
    if args.url:
        check_server(args.url, args.token)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    who = args.model or args.policy
    bar = tqdm(
        total=len(tasks) * args.samples, desc=f"{who} on {args.dataset}", unit="ep", file=sys.stderr
    )
    tally = {"n": 0, "solved": 0, "reward": 0.0}

    def progress(row: dict[str, Any]) -> None:
        tally["n"] += 1
        tally["solved"] += row["reward"] >= 1.0
        tally["reward"] += row["reward"]
        bar.set_postfix(
            acc=f"{tally['solved'] / tally['n']:.3f}",
            reward=f"{tally['reward'] / tally['n']:.3f}",
            refresh=False,
        )
        bar.update(1)

    def resumed(done: int) -> None:
        """Say what the run's log already holds; the bar counts it without timing it."""
        if done:
            left = bar.total - done
            bar.initial = bar.n = done  # the rate counts only the episodes played now
            bar.write(
                f"resuming: {done} of {bar.total} episodes are already in this run's log "
                + (f"({left} to play)" if left else "(nothing to play; --fresh starts over)"),
                file=sys.stderr,
            )

    def run(url: str):
        return asyncio.run(
            run_eval(
                settings,
                tasks,
                url,
                headers=headers,
                on_result=progress,
                on_start=resumed,
                json_path=args.json,
            )
        )

    try:
        if args.url:
            result, run_dir = run(args.url)
        else:
            from analyst_env.server.local_server import serving

            with serving(served, sessions=args.concurrency + 2) as url:
                result, run_dir = run(url)
    except (RunMismatch, ChatError, ValueError) as exc:
        bar.close()
        print(error_line(exc), file=sys.stderr)
        return USAGE_STATUS
    except KeyboardInterrupt:
        bar.close()
        print(
            f"interrupted: the {tally['n']} episode(s) finished in this run are kept in its log "
            f"under {settings.runs_dir}; run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    bar.close()
    for task in [t for t in result["tasks"] if "error" in t][:10]:
        print(f"  {task['task_id']}: {task['error']}", file=sys.stderr)
    pass_k = " ".join(f"pass@{k}={v:.4f}" for k, v in result["pass_at_k"].items())
    print(
        f"{who} on {args.dataset}: n={result['n']} mean_reward={result['mean_reward']:.4f} "
        f"{pass_k} errors={result['errors']}"
    )
    print(f"run {result['run_id']}: {run_dir}/report.html", file=sys.stderr)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """``validate --dataset DATASET``: table and summary on stdout; exit 1 if any task fails a
    check."""
    from tqdm import tqdm

    from analyst_env.datasets import load_dataset
    from analyst_env.evaluation.validation import (
        format_probes,
        format_table,
        report,
        summary,
        validate,
    )

    _dataset_of_validate(args)
    if args.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {args.concurrency}")
    if args.sample < 1 or args.start < 0:
        raise UsageError("--sample must be at least 1 and --start at least 0")
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1, got {args.limit}")
    check_dataset(args.dataset)
    settings = settings_from_args(args)
    check_output_file(args.json)
    if args.url:
        check_server(args.url, args.token)
    try:
        dataset = load_dataset(args.dataset)
    except (ValueError, OSError) as exc:
        raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
    if dataset.unbounded and args.split not in dataset.splits():
        raise UsageError(
            f"no split {args.split!r} in {args.dataset}; splits: {', '.join(dataset.splits())}"
        )
    generation = None
    if dataset.unbounded:
        from analyst_env.datasets.procedural.validate_sample import sample_for_validation

        tasks, generation = sample_for_validation(dataset, args.split, args.start, args.sample)
    else:
        tasks = dataset.tasks[: args.limit]
    solve = _frozen_solutions(args.dataset)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
    bar = tqdm(total=len(tasks), desc=f"validate {args.dataset}", unit="task", file=sys.stderr)

    def run(url: str) -> list[dict[str, Any]]:
        return asyncio.run(
            validate(
                url,
                tasks,
                concurrency=args.concurrency,
                headers=headers,
                on_result=lambda _: bar.update(1),
                **solve,
            )
        )

    if args.url:
        rows = run(args.url)
    else:
        from analyst_env.server.local_server import serving

        with serving(settings, sessions=args.concurrency + 4, datasets=[dataset]) as url:
            rows = run(url)
    bar.close()
    result = report(args.dataset, rows)
    if generation is not None:
        result["generation"] = generation
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    print(format_table(rows))
    for failure in result["failed"]:
        print(
            f"  FAIL {failure['task_id']} [{failure['check']}]: {failure['reason']}",
            file=sys.stderr,
        )
    for broken in result["broken_upstream"]:
        print(f"  broken upstream {broken['task_id']}: {broken['gold_status']}", file=sys.stderr)
    print(format_probes(result))
    print(summary(result))
    if generation is not None:
        print(f"generation: {json.dumps(generation, sort_keys=True)}")
        if generation["nondeterministic"]:
            return 1
    return 1 if result["failed"] else 0


def _frozen_solutions(spec: str) -> dict[str, Any]:
    """``{"solve": ...}`` for a ``tasks:DIR`` set written with its ``solutions.jsonl``, so the
    solution check replays them; else nothing (a procedural task's plan gives its own)."""
    from pathlib import Path

    from analyst_env.datasets.procedural.solution_files import SOLUTIONS_FILE, FrozenSolutions

    spec = spec.strip()
    if not spec.startswith("tasks:"):
        return {}
    folder = Path(spec.removeprefix("tasks:"))
    if not (folder / SOLUTIONS_FILE).is_file():
        return {}
    try:
        return {"solve": FrozenSolutions(folder).solution_for}
    except ValueError as exc:
        raise UsageError(f"cannot read the solutions of {spec!r}: {exc}") from None


def _dataset_of_validate(args: argparse.Namespace) -> None:
    """``validate`` names its dataset with ``--dataset``, as every other command does; the old
    positional ``validate NAME`` still works, with a note, so scripts keep running."""
    if args.dataset_positional is not None:
        if args.dataset is not None and args.dataset != args.dataset_positional:
            raise UsageError(
                f"two datasets given ({args.dataset_positional!r} and --dataset {args.dataset!r})"
            )
        print(
            f"analyst-env: note: 'validate {args.dataset_positional}' is deprecated; "
            f"write 'validate --dataset {args.dataset_positional}'",
            file=sys.stderr,
        )
        args.dataset = args.dataset_positional
    if args.dataset is None:
        raise UsageError("validate needs --dataset (see 'analyst-env validate --help')")


def add_eval_parsers(sub) -> None:
    """Register ``eval`` and ``validate`` on the top-level subparsers."""
    ev = sub.add_parser("eval", help="Evaluate a model (or the oracle/null policy) on a dataset")
    ev.add_argument("--dataset", required=True, help=DATASET_HELP)
    who = ev.add_mutually_exclusive_group(required=True)
    who.add_argument("--policy", choices=["oracle", "null"], help="A scripted policy")
    who.add_argument("--model", help="The model name sent to --model-url")
    ev.add_argument("--model-url", help="OpenAI-compatible endpoint base, e.g. http://host:8000/v1")
    ev.add_argument("--api-key-env", help="Environment variable holding the endpoint's API key")
    ev.add_argument(
        "--tool-format",
        default="auto",
        choices=["auto", "native", "text"],
        help="native tool calls, the text <tool_call> form, or auto (probe)",
    )
    ev.add_argument("--samples", type=int, default=1, help="Episodes per task, for pass@k")
    ev.add_argument(
        "--temperature", type=float, help="Sampling temperature (default: the endpoint's)"
    )
    ev.add_argument("--top-p", type=float, help="Nucleus sampling (default: the endpoint's)")
    ev.add_argument("--max-tokens", type=int, help="Completion tokens per reply")
    ev.add_argument("--seed", type=int, help="Sampling seed (sent to the endpoint) and reset seed")
    ev.add_argument("--max-turns", type=int, default=20, help="Replies per episode (default 20)")
    ev.add_argument("--token-budget", type=int, help="Completion tokens per episode")
    ev.add_argument("--split", help="Only this split")
    ev.add_argument("--limit", type=int, help="Only the first N tasks")
    ev.add_argument("--url", help="Evaluate against this server (default: start one in-process)")
    ev.add_argument("--token", help="Bearer token for --url")
    ev.add_argument("--json", help="Also write the report here (and the HTML report beside it)")
    ev.add_argument("--concurrency", type=int, default=8, help="Episodes in flight (default 8)")
    ev.add_argument(
        "--request-timeout",
        type=float,
        default=300.0,
        help="Seconds per model request (default 300)",
    )
    ev.add_argument("--retries", type=int, default=4, help="Retries of a 429, 5xx or timeout")
    ev.add_argument(
        "--retry-backoff",
        type=float,
        default=1.0,
        help="First retry wait in seconds, doubled each retry (default 1)",
    )
    ev.add_argument("--runs-dir", help="Where runs live (default: <state_dir>/runs)")
    ev.add_argument("--run-name", help="Name the run (default: derived from its settings)")
    ev.add_argument("--fresh", action="store_true", help="Start the run over instead of resuming")
    ev.add_argument(
        "--include-quarantined",
        action="store_true",
        help="Also play upstream tasks whose gold is known to be broken (skipped by default)",
    )
    ev.set_defaults(func=cmd_eval)

    va = sub.add_parser(
        "validate", help="Check every task: oracle scores 1, null 0, the same twice, no gold leaks"
    )
    va.add_argument("--dataset", help=DATASET_HELP)
    va.add_argument(  # the old spelling, `validate NAME`: still read, with a deprecation note
        "dataset_positional", nargs="?", metavar="DATASET", help=argparse.SUPPRESS
    )
    va.add_argument("--url", help="Validate against this server (default: start one in-process)")
    va.add_argument("--json", help="Write the report here")
    va.add_argument("--concurrency", type=int, default=8, help="Tasks in flight (default 8)")
    va.add_argument("--token", help="Bearer token for --url")
    va.add_argument(
        "--limit", type=int, help="Check only the first N tasks of a bounded set (default: all)"
    )
    va.add_argument(
        "--sample", type=int, default=100, help="Tasks checked of an unbounded set (default 100)"
    )
    va.add_argument(
        "--split", default="train", help="Split sampled of an unbounded set (default train)"
    )
    va.add_argument(
        "--start", type=int, default=0, help="First index sampled of an unbounded set (default 0)"
    )
    va.set_defaults(func=cmd_validate)
