"""Turn a submitted answer into a reward: the task's scorer, or its verify hooks.

Every answer is first held to the size cap (``Limits.max_answer_bytes``, 64 KiB
by default, ``ANALYST_ENV_MAX_ANSWER_BYTES``): a longer answer scores 0.0
without being parsed, and the verdict says so. Then:

* Tasks with ``verify`` shell commands are scored the way OpenEnv's
  ``jupyter_env`` and Harbor score them, but out of the agent's reach. First
  every process the agent started is killed, its kernel included
  (``Sandbox.stop_agent_processes``: the slot's cgroup or uid on the local
  backend, every descendant of the slot runner on Docker and Modal; a backend
  that cannot, E2B, refuses the task with a 0 and the reason), and a fresh
  kernel is forked from the clean template. Only then is the verify directory
  created, with a random name the agent could not know in advance
  (``logs/verifier-<random>``; ``mkdir`` refuses one that exists). The answer
  is written to ``answer.txt`` there, and each command runs in a new process
  with a clean environment (``Sandbox.run_verifier``, ``envs.verifier_env``: a
  fixed system ``PATH``, ``HOME`` in the verify directory, nothing the cells
  set), with ``$VERIFIER_DIR`` set to the directory and ``logs/verifier`` in its
  text pointing at it; it is refused if the sandbox could write a directory on
  that ``PATH``. The reward is the fraction that exit 0, unless a hook wrote a
  number to its ``reward.txt``, which wins (only a finite number in [0, 1]: see
  ``verifiers/hooks.py``). Whatever the agent left in ``logs/verifier`` (a
  ``reward.txt``, a symlink) is never read. See docs/security.md,
  "Verification the agent cannot reach".
* Other tasks are scored by their named scorer against the gold answer, which
  never leaves the server, in a child process with time and memory limits
  (``verifiers/bounded.py``). Files the agent produced are read through a
  reader that refuses symlinks, non-regular files and files over
  ``Limits.max_scored_file_mb``; before its first read the agent's processes
  are stopped as above, where the backend can, so none rewrites a file while
  it is scored.

Any failure (a limit, a crash, a file that cannot be read, a refused
verification) is a reward of 0.0 with the reason, never an exception:
``final_answer`` always ends the episode. The verdict keeps its components,
which the final observation reports as the reward breakdown.
"""

from __future__ import annotations

import re
import secrets
import shlex

from analyst_env.envs.sandbox import VerifierUnavailable
from analyst_env.server.episode import Episode, Limits
from analyst_env.verifiers import Verdict, reward_from_verify
from analyst_env.verifiers.bounded import ScoringLimits, score_bounded
from analyst_env.verifiers.hooks import read_reward_txt

VERIFY_DIR_PREFIX = "logs/verifier-"
_CONVENTIONAL_DIR = re.compile(r"(?<![\w./-])(?:\./)?logs/verifier(?![\w-])")
_FILE_CHECK_TIMEOUT_S = 15.0


def answer_too_large(answer: str, limits: Limits) -> Verdict | None:
    """The 0.0 verdict for an answer over the size cap, or ``None`` if it fits."""
    size = len(answer.encode("utf-8", errors="surrogatepass"))
    if size <= limits.max_answer_bytes:
        return None
    return Verdict(
        0.0,
        {"answer_within_size_limit": 0.0},
        f"the answer is {size} bytes, over the limit of {limits.max_answer_bytes} bytes "
        "(ANALYST_ENV_MAX_ANSWER_BYTES); it was not scored",
    )


def verify_answer(episode: Episode, answer: str) -> Verdict:
    """The verdict on ``answer`` in ``episode``; its reward is in [0, 1]. Never raises."""
    refused = answer_too_large(answer, episode.limits)
    if refused is not None:
        return refused
    try:
        if episode.task.verify:
            return _run_hooks(episode, answer)
        return _score(episode, answer)
    except Exception as exc:  # noqa: BLE001 - a scoring failure is a 0 with its reason
        return Verdict(0.0, {}, f"scoring failed: {type(exc).__name__}: {str(exc)[:300]}")


def _score(episode: Episode, answer: str) -> Verdict:
    task, limits = episode.task, episode.limits
    reader = bounded_reader(
        episode.sandbox,
        limits.max_scored_file_mb * 1024 * 1024,
        before_first_read=lambda: _stop_agent_if_possible(episode.sandbox),
    )
    scoring = ScoringLimits(
        timeout_s=limits.score_timeout_s,
        memory_mb=limits.score_memory_mb,
        cpu_s=int(limits.score_timeout_s),
        profile=limits.scoring_profile,
    )
    verdict = score_bounded(task.verifier, answer, task.answer, scoring, dict(task.files), reader)
    return Verdict(
        verdict.reward,
        verdict.components,
        f"{verdict.detail} [scoring profile: {limits.scoring_profile}]",
    )


def _stop_agent_if_possible(sandbox) -> None:
    """Stop the agent's processes before a scorer reads its files; a backend that cannot (E2B)
    is read as it is: a running process could only change the agent's own files, each read
    once and size-checked, while a verify command would trust what it runs."""
    try:
        sandbox.stop_agent_processes()
    except VerifierUnavailable:
        pass


def bounded_reader(sandbox, max_bytes: int, before_first_read=None):
    """A ``read_file`` for scorers: only regular files (no symlinks) of at most ``max_bytes``.

    ``before_first_read`` (if given) runs once, before the first file is looked at.

    Raises (in the returned function):
        FileNotFoundError: No such file.
        OSError: A symlink, not a regular file, or too large; the message says which.
    """

    pending = [before_first_read] if before_first_read is not None else []

    def read_file(name: str) -> bytes:
        while pending:
            pending.pop()()
        path = shlex.quote(name)
        check = (
            f"if [ -L {path} ]; then echo symlink; elif [ ! -e {path} ]; then echo missing; "
            f"elif [ ! -f {path} ]; then echo special; else wc -c < {path}; fi"
        )
        result = sandbox.run_shell(check, timeout_s=_FILE_CHECK_TIMEOUT_S)
        status = (result.stdout or "").strip()
        if status == "missing":
            raise FileNotFoundError(f"{name} not found in the working directory")
        if status == "symlink":
            raise OSError(f"{name} is a symbolic link; only regular files are scored")
        if status == "special" or not status.isdigit():
            raise OSError(f"{name} is not a regular file")
        if int(status) > max_bytes:
            raise OSError(
                f"{name} is {int(status)} bytes, over the scoring limit of {max_bytes} bytes"
            )
        data = sandbox.get_file(name)
        if len(data) > max_bytes:
            raise OSError(f"{name} grew over the scoring limit of {max_bytes} bytes")
        return data

    return read_file


def _run_hooks(episode: Episode, answer: str) -> Verdict:
    try:
        return _run_hooks_unreached(episode, answer)
    except VerifierUnavailable as exc:
        return Verdict(0.0, {}, f"verification refused: {exc}")


def _run_hooks_unreached(episode: Episode, answer: str) -> Verdict:
    """The hooks' verdict, run after every agent process is gone (see the module docstring)."""
    task, sandbox = episode.task, episode.require_sandbox()
    timeout_s = episode.limits.shell_timeout_s
    sandbox.stop_agent_processes()
    verify_dir = VERIFY_DIR_PREFIX + secrets.token_hex(16)
    made = sandbox.run_shell(
        "{ [ -d logs ] && [ ! -L logs ]; } || { rm -rf logs && mkdir logs; }; "
        f"mkdir -m 700 {verify_dir}",
        timeout_s=timeout_s,
    )
    if made.exit_code != 0:
        return Verdict(
            0.0,
            {},
            f"could not create a fresh verify directory: {(made.stderr or '').strip()[:200]}",
        )
    sandbox.put_file(f"{verify_dir}/answer.txt", answer.encode())
    exit_codes = []
    for command in task.verify:
        pointed = _CONVENTIONAL_DIR.sub(verify_dir, command)
        result = sandbox.run_verifier(pointed, verifier_dir=verify_dir, timeout_s=timeout_s)
        exit_codes.append(result.exit_code)
    try:
        reward_txt = bounded_reader(sandbox, 4096)(f"{verify_dir}/reward.txt").decode(
            errors="replace"
        )
    except FileNotFoundError:
        reward_txt = None
    except OSError as exc:
        reward_txt = f"<unreadable: {exc}>"
    components = {f"verify:{i}": float(code == 0) for i, code in enumerate(exit_codes)}
    written, problem = read_reward_txt(reward_txt)
    if written is not None:
        components["reward.txt"] = written
    passed = sum(code == 0 for code in exit_codes)
    detail = f"{passed}/{len(exit_codes)} verify commands passed"
    if problem is not None:
        detail += f"; {problem}, so the reward is 0"
    elif written is not None:
        detail += f"; reward.txt says {written:g}"
    return Verdict(reward_from_verify(exit_codes, reward_txt), components, detail)
