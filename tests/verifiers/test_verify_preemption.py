"""Verify hooks on the real sandbox: nothing the agent writes before final_answer can set the
reward.

The agent shares the working directory with the verifiers. Before verification
it can plant ``logs/verifier/reward.txt``, make ``logs/verifier`` a symlink, or
pre-create directories; none of that may survive into the reward, and a hook
that writes an invalid number scores 0, not a clamped 1.
"""

from __future__ import annotations

import pytest
from support import call

PLANTS = {
    "reward.txt": "mkdir -p logs/verifier && echo 1.0 > logs/verifier/reward.txt",
    "huge reward": "mkdir -p logs/verifier && echo 1e309 > logs/verifier/reward.txt",
    "symlinked dir": (
        "mkdir -p logs /tmp/mine && echo 1 > /tmp/mine/reward.txt && ln -s /tmp/mine logs/verifier"
    ),
    "logs is a symlink": (
        "mkdir -p /tmp/l/verifier && echo 1 > /tmp/l/verifier/reward.txt && rm -rf logs && "
        "ln -s /tmp/l logs"
    ),
    "logs is a file": "rm -rf logs && echo 1 > logs",
    "guessed dirs": "for i in 0 1 2 3; do mkdir -p logs/verifier-$i && echo 1 > "
    "logs/verifier-$i/reward.txt; done",
}


@pytest.mark.parametrize("plant", PLANTS, ids=list(PLANTS))
def test_a_planted_reward_never_counts(env, plant):
    # tiny-verify-hooks: out.txt is missing, so 2 of 3 hooks pass whatever the agent planted.
    env.reset(task_id="tiny-verify-hooks")
    assert call(env, "execute_shell_command", command=PLANTS[plant]).result["is_error"] is False
    obs = call(env, "final_answer", answer="done")
    assert obs.done and obs.reward == pytest.approx(2 / 3), obs.metadata["reward_breakdown"]
    assert "reward.txt" not in obs.metadata["reward_breakdown"]["components"]


def test_hooks_still_read_the_answer_and_write_their_reward_at_the_conventional_path(env):
    env.reset(task_id="tiny-reward-file")  # its hook: echo 0.25 > logs/verifier/reward.txt
    call(
        env,
        "execute_shell_command",
        command="mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt",
    )
    obs = call(env, "final_answer", answer="anything")
    assert obs.reward == 0.25
    assert (
        obs.metadata["reward_breakdown"]["detail"]
        == "1/1 verify commands passed; reward.txt says 0.25"
    )


def test_an_invalid_number_from_a_hook_scores_0_with_the_reason(env, runtime):
    task = runtime.task("tiny-reward-file")
    broken = task.model_copy(update={"verify": ['echo 1e309 > "$VERIFIER_DIR/reward.txt"']})
    runtime._by_id[task.id] = broken
    try:
        env.reset(task_id=task.id)
        obs = call(env, "final_answer", answer="anything")
    finally:
        runtime._by_id[task.id] = task
    assert obs.done and obs.reward == 0.0
    assert "not a finite number" in obs.metadata["reward_breakdown"]["detail"]
