"""``analyst-env export``: tasks as Harbor task directories, recorded episodes as notebooks
or SFT records.

``export harbor`` skips quarantined tasks (a broken upstream gold) unless asked, and
bundles the grader into each task (``trainers/harbor_export.py``); ``export
trajectories`` reads the server's state directory (``trainers/trajectory_export.py``).
"""

from __future__ import annotations

import argparse
import sys

from analyst_env.cli_checks import (
    DATASET_HELP,
    UsageError,
    check_dataset,
    check_input_path,
    error_line,
    settings_from_args,
)


def cmd_export(args: argparse.Namespace) -> int:
    """``export harbor`` (task directories) and ``export trajectories`` (notebooks or SFT
    records)."""
    if args.what == "harbor":
        from analyst_env.datasets import load_dataset
        from analyst_env.trainers.harbor_export import export as export_harbor

        check_dataset(args.dataset)
        check_input_path(args.wheelhouse, "--wheelhouse", folder=True)
        if args.grader_requirement and args.grader_requirement.endswith(".whl"):
            check_input_path(args.grader_requirement, "--grader-requirement")
        try:
            dataset = load_dataset(args.dataset)
            if dataset.unbounded:
                raise ValueError("it is unbounded; freeze a range first (analyst-env generate)")
            tasks = dataset.tasks
        except (ValueError, OSError) as exc:
            raise UsageError(f"cannot load dataset {args.dataset!r}: {exc}") from None
        tasks = [t for t in tasks if args.split is None or t.split == args.split]
        held = [] if args.include_quarantined else [t for t in tasks if t.quarantine_reason]
        tasks = [t for t in tasks if args.include_quarantined or not t.quarantine_reason]
        tasks = tasks[: args.limit]
        if held:
            print(
                f"skipped {len(held)} quarantined task(s) (broken upstream gold; "
                "--include-quarantined exports them)",
                file=sys.stderr,
            )
        try:
            dirs = export_harbor(
                tasks,
                args.out,
                grader_requirement=args.grader_requirement,
                base_image=args.base_image,
                wheelhouse=args.wheelhouse,
            )
        except (RuntimeError, OSError) as exc:
            raise UsageError(exc) from None
        print(f"wrote {len(dirs)} Harbor task(s) to {args.out}/tasks")
        return 0
    from analyst_env.trainers.trajectory_export import export as export_trajectories
    from analyst_env.trainers.trajectory_export import trajectory_files

    check_input_path(args.state_dir, "--state-dir", folder=True)
    state_dir = args.state_dir or settings_from_args(args).state_dir
    if not trajectory_files(state_dir):
        print(error_line(f"no trajectories under {state_dir}/trajectories"), file=sys.stderr)
        return 1
    written = export_trajectories(state_dir, args.format, args.out)
    print(f"wrote {len(written)} file(s) to {args.out}")
    return 0


def add_export_parser(sub) -> None:
    """Register ``export harbor|trajectories`` on the top-level subparsers."""
    export = sub.add_parser("export", help="Export tasks for Harbor, or recorded trajectories")
    what = export.add_subparsers(dest="what", required=True)
    harbor = what.add_parser(
        "harbor", help="One Harbor task directory per task, graded by our scorer"
    )
    harbor.add_argument("--dataset", required=True, help=DATASET_HELP)
    harbor.add_argument("--out", required=True, help="Output directory (tasks/ is written inside)")
    harbor.add_argument("--split", help="Only this split")
    harbor.add_argument("--limit", type=int, help="Only the first N tasks")
    harbor.add_argument(
        "--include-quarantined",
        action="store_true",
        help="also export tasks quarantined for a broken upstream gold (metadata gold_status)",
    )
    harbor.add_argument(
        "--grader-requirement",
        default=None,
        help="the grader bundled into each task's tests/: a local wheel (copied in) or a pip "
        "requirement (installed at verification; needs network). Default: a wheel built from the "
        "running package",
    )
    harbor.add_argument(
        "--base-image",
        default="python:3.11-slim",
        help="the image each task's Dockerfile builds FROM (default python:3.11-slim; "
        "e.g. the local tag deploy/image/base.sh makes where Docker Hub is out of reach)",
    )
    harbor.add_argument(
        "--wheelhouse",
        default=None,
        help="a folder of wheels for the image's packages: copied into each task's build "
        "context and installed from there only (no package index at build time)",
    )
    harbor.set_defaults(func=cmd_export)
    traj = what.add_parser(
        "trajectories", help="Recorded episodes as notebooks (ipynb) or SFT chat records (sft)"
    )
    traj.add_argument(
        "--format",
        required=True,
        choices=["ipynb", "sft"],
        help="ipynb: one notebook per episode; sft: chat records for supervised fine-tuning",
    )
    traj.add_argument(
        "--out",
        default="trajectories-export",
        help="Output directory (default trajectories-export)",
    )
    traj.add_argument(
        "--state-dir",
        help="The server's state directory (default: ANALYST_ENV_STATE_DIR or the cache)",
    )
    traj.set_defaults(func=cmd_export)
