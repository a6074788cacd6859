"""Turn a submitted answer into a reward: the task's scorer, or its verify hooks.

Tasks with ``verify`` shell commands are scored the way OpenEnv's ``jupyter_env``
and Harbor score them: the answer is written to ``logs/verifier/answer.txt``,
the commands run in the episode's sandbox, and the reward is the fraction that
exit 0, unless a float was written to ``logs/verifier/reward.txt``, which wins.
Other tasks are scored by their named scorer against the gold answer, which
never leaves the server. Either way the result keeps its components, which the
final observation reports as the reward breakdown.
"""

from __future__ import annotations

from analyst_env.server.episode import Episode
from analyst_env.verifiers import Verdict, VerifyContext, judge, reward_from_verify
from analyst_env.verifiers.hooks import parse_reward_txt

ANSWER_PATH = "logs/verifier/answer.txt"
REWARD_PATH = "logs/verifier/reward.txt"


def verify_answer(episode: Episode, answer: str) -> Verdict:
    """The verdict on ``answer`` in ``episode``; its reward is in [0, 1]."""
    task = episode.task
    sandbox = episode.sandbox
    if not task.verify:
        context = VerifyContext(task_files=dict(task.files), read_file=sandbox.get_file)
        return judge(task.verifier, answer, task.answer, context)
    sandbox.put_file(ANSWER_PATH, answer.encode())
    exit_codes = [
        sandbox.run_shell(command, timeout_s=episode.limits.shell_timeout_s).exit_code
        for command in task.verify
    ]
    try:
        reward_txt = sandbox.get_file(REWARD_PATH).decode(errors="replace")
    except FileNotFoundError:
        reward_txt = None
    components = {f"verify:{i}": float(code == 0) for i, code in enumerate(exit_codes)}
    written = parse_reward_txt(reward_txt)
    if written is not None:
        components["reward.txt"] = written
    passed = sum(code == 0 for code in exit_codes)
    detail = f"{passed}/{len(exit_codes)} verify commands passed"
    if written is not None:
        detail += f"; reward.txt says {written:g}"
    return Verdict(reward_from_verify(exit_codes, reward_txt), components, detail)
