"""Turn a submitted answer into a reward: the task's scorer, or its verify hooks.

Tasks with ``verify`` shell commands are scored the way OpenEnv's ``jupyter_env``
and Harbor score them: the answer is written to ``logs/verifier/answer.txt``,
the commands run in the episode's sandbox, and the reward is the fraction that
exit 0, unless a float was written to ``logs/verifier/reward.txt``, which wins.
Other tasks are scored by their named scorer against the gold answer, which
never leaves the server.
"""

from __future__ import annotations

from analyst_env.server.episode import Episode
from analyst_env.verifiers import reward_from_verify, score

ANSWER_PATH = "logs/verifier/answer.txt"
REWARD_PATH = "logs/verifier/reward.txt"


def verify_answer(episode: Episode, answer: str) -> float:
    """Reward in [0, 1] for ``answer`` in ``episode``."""
    task = episode.task
    if not task.verify:
        return score(task.verifier, answer, task.answer)
    sandbox = episode.sandbox
    sandbox.put_file(ANSWER_PATH, answer.encode())
    exit_codes = [
        sandbox.run_shell(command, timeout_s=episode.limits.shell_timeout_s).exit_code
        for command in task.verify
    ]
    try:
        reward_txt = sandbox.get_file(REWARD_PATH).decode(errors="replace")
    except FileNotFoundError:
        reward_txt = None
    return reward_from_verify(exit_codes, reward_txt)
