"""Grade a Harbor task's answer with the server's own rule: what an exported ``tests/test.sh`` runs.

``analyst-env export harbor`` (``trainers/harbor_export.py``) writes task directories whose
``tests/test.sh`` installs the grader wheel and runs
``python -m analyst_env.server.harbor_grader --task ... --input ... --answer ... --reward ...``.
It lives with the server because it *is* the server's verification (``verify_answer``) over a
plain directory instead of a sandbox, so an exported task scores exactly as a served one.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

from analyst_env.envs.verifier_env import clean_env
from analyst_env.server.episode import Episode, Limits
from analyst_env.server.verification import verify_answer
from analyst_env.task_format import Task, answer_references

if TYPE_CHECKING:
    from analyst_env.envs.sandbox import Sandbox


@dataclass
class _ShellResult:
    exit_code: int
    stdout: str = ""
    stderr: str = ""


class _DirectorySandbox:
    """The sandbox interface ``verify_answer`` needs, over a plain directory (the agent's working
    dir)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put_file(self, path: str, data: bytes) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def get_file(self, path: str) -> bytes:
        return (self.root / path).read_bytes()

    def stop_agent_processes(self) -> None:
        """Nothing to stop here: Harbor runs its verifier after the agent's phase, in the agent's
        container, and owns that boundary (the served backends stop the agent themselves)."""

    def run_verifier(self, command: str, *, verifier_dir: str, timeout_s: float) -> _ShellResult:
        """A verify command with the served backends' clean environment, not the caller's."""
        home = str((self.root / verifier_dir).resolve())
        env = clean_env(home, {"VERIFIER_DIR": home})
        return self.run_shell(command, timeout_s, env=env)

    def run_shell(
        self, command: str, timeout_s: float | None = None, env: dict[str, str] | None = None
    ) -> _ShellResult:
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", command],
                cwd=self.root,
                timeout=timeout_s,
                capture_output=True,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return _ShellResult(exit_code=124)
        return _ShellResult(
            proc.returncode,
            proc.stdout.decode(errors="replace"),
            proc.stderr.decode(errors="replace"),
        )


def grade(task_json: Path, input_dir: Path, answer_file: Path) -> float:
    """The reward of the answer in ``answer_file`` for the task in ``task_json``: the server's rule.

    A missing answer file counts as an empty answer.
    """
    task = Task.model_validate_json(task_json.read_text())
    task = task.model_copy(update={"files": {name: str(input_dir / name) for name in task.files}})
    for ref in answer_references(
        task.answer
    ):  # bundled next to task.json (absolute paths stay as they are)
        ref["path"] = str(task_json.parent / ref["path"])
    answer = answer_file.read_text(errors="replace").strip() if answer_file.exists() else ""
    # The directory stands in for the sandbox: verify_answer only uses the part it implements.
    sandbox = cast("Sandbox", _DirectorySandbox(input_dir))
    episode = Episode(episode_id="harbor", task=task, sandbox=sandbox, limits=Limits())
    return verify_answer(episode, answer).reward


def main(argv: list[str] | None = None) -> int:
    """``python -m analyst_env.server.harbor_grader ...``: the entry point ``tests/test.sh``
    runs."""
    parser = argparse.ArgumentParser(
        prog="analyst_env.server.harbor_grader",
        description="Score an answer file and write the reward file",
    )
    parser.add_argument("--task", type=Path, required=True)
    parser.add_argument("--input", type=Path, required=True)
    parser.add_argument("--answer", type=Path, required=True)
    parser.add_argument("--reward", type=Path, required=True)
    args = parser.parse_args(argv)
    reward = grade(args.task, args.input, args.answer)
    args.reward.parent.mkdir(parents=True, exist_ok=True)
    args.reward.write_text(f"{reward}\n")
    print(f"reward {reward}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
