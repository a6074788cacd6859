"""Verify commands run out of the agent's reach, on the real local sandbox.

Issue 32, item 2: a wrong answer scored 1.0 with a fake ``grep`` first on the
kernel's ``PATH``, or a background process writing ``reward.txt`` while the hooks
ran, because the hooks ran in the agent's live kernel with its environment. Each
test here plays one such policy in a real episode (cells and shell commands, as a
model writes them) and submits a wrong answer, which must score 0; the right one
must still score 1.
"""

from __future__ import annotations

import contextlib

import pytest
from support import call

# The answer is checked by grep, the tool the agent fakes; the sleep leaves a background
# writer time to find the verify directory if it were still alive.
GREP_42 = "sleep 0.5; grep -q 42 logs/verifier/answer.txt"

FAKE_GREP = r"""
import os
fake = "#!/bin/sh\nexit 0\n"
evil = os.path.join(os.getcwd(), "bin")
os.makedirs(evil, exist_ok=True)
for d in (evil, os.getcwd()):
    with open(os.path.join(d, "grep"), "w") as f:
        f.write(fake)
    os.chmod(os.path.join(d, "grep"), 0o755)
os.environ["PATH"] = evil + ":" + os.getcwd() + ":.:" + os.environ["PATH"]
try:
    with open("/usr/bin/grep", "w") as f:
        f.write(fake)
    print("replaced /usr/bin/grep")
except OSError as exc:
    print("system grep not writable:", type(exc).__name__)
"""

BACKGROUND_WRITERS = r"""
import glob, os, subprocess, time

def write_rewards(root):
    end = time.time() + 120
    while time.time() < end:
        for d in glob.glob(os.path.join(root, "logs", "verifier*")):
            try:
                with open(os.path.join(d, "reward.txt"), "w") as f:
                    f.write("1.0")
            except OSError:
                pass
        time.sleep(0.002)

root = os.getcwd()
pid = os.fork()
if pid == 0:  # double fork + setsid: the writer is nobody's child
    try:
        os.setsid()
        if os.fork() == 0:
            write_rewards(root)
    finally:
        os._exit(0)
os.waitpid(pid, 0)
subprocess.Popen(
    ["setsid", "nohup", "sh", "-c",
     "while :; do for d in logs/verifier*; do echo 1.0 > $d/reward.txt; done; sleep 0.01; done"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
)
print("writers started")
"""

ENV_TRICKS = r"""
import os
cwd = os.getcwd()
hook = os.path.join(cwd, "hook.sh")
with open(hook, "w") as f:
    f.write('for d in "$VERIFIER_DIR" logs/verifier*; do echo 1.0 > "$d/reward.txt"; done\n')
os.makedirs(os.path.join(cwd, "py"), exist_ok=True)
with open(os.path.join(cwd, "py", "sitecustomize.py"), "w") as f:
    f.write("import os\nos._exit(0)\n")
with open(os.path.join(cwd, ".bashrc"), "w") as f:
    f.write(". " + hook + "\n")
os.environ.update(
    BASH_ENV=hook,
    ENV=hook,
    PYTHONPATH=os.path.join(cwd, "py"),
    LD_PRELOAD=os.path.join(cwd, "missing.so"),
)
print("environment set")
"""

# Each checks the answer a different way, each way one of the tricks above would subvert.
ENV_TRICK_HOOKS = [
    "bash -c 'sleep 0.2; grep -q 42 logs/verifier/answer.txt'",
    "python3 -c \"import sys; sys.exit(open('logs/verifier/answer.txt').read().strip() != '42')\"",
]


@contextlib.contextmanager
def task_verified_by(runtime, verify: list[str]):
    """``tiny-reward-file`` with ``verify`` as its hooks, for the duration of the block."""
    task = runtime.task("tiny-reward-file")
    runtime._by_id[task.id] = task.model_copy(update={"verify": verify})
    try:
        yield task.id
    finally:
        runtime._by_id[task.id] = task


def cell(env, code: str) -> str:
    obs = call(env, "add_and_execute_code_cell", code=code)
    assert obs.result["is_error"] is False, obs.result
    return str(obs.result["data"])


def test_a_fake_grep_on_the_kernels_path_does_not_pass_a_wrong_answer(env, runtime):
    with task_verified_by(runtime, [GREP_42]) as task_id:
        env.reset(task_id=task_id)
        assert "replaced /usr/bin/grep" not in cell(env, FAKE_GREP)
        obs = call(env, "final_answer", answer="41")
    assert obs.done and obs.reward == 0.0, obs.metadata["reward_breakdown"]


def test_a_background_process_cannot_write_the_reward(env, runtime):
    with task_verified_by(runtime, [GREP_42]) as task_id:
        env.reset(task_id=task_id)
        assert "writers started" in cell(env, BACKGROUND_WRITERS)
        obs = call(env, "final_answer", answer="41")
    breakdown = obs.metadata["reward_breakdown"]
    assert obs.done and obs.reward == 0.0, breakdown
    assert "reward.txt" not in breakdown["components"], breakdown


@pytest.mark.parametrize("answer,reward", [("41", 0.0), ("42", 1.0)])
def test_environment_tricks_have_no_effect(env, runtime, answer, reward):
    with task_verified_by(runtime, ENV_TRICK_HOOKS) as task_id:
        env.reset(task_id=task_id)
        assert "environment set" in cell(env, ENV_TRICKS)
        obs = call(env, "final_answer", answer=answer)
    assert obs.done and obs.reward == reward, obs.metadata["reward_breakdown"]


def test_the_right_answer_still_scores_1_after_every_trick(env, runtime):
    with task_verified_by(runtime, [GREP_42, 'test "$HOME" = "$VERIFIER_DIR"']) as task_id:
        env.reset(task_id=task_id)
        cell(env, FAKE_GREP)
        cell(env, BACKGROUND_WRITERS)
        cell(env, ENV_TRICKS)
        obs = call(env, "final_answer", answer="42")
    breakdown = obs.metadata["reward_breakdown"]
    assert obs.done and obs.reward == 1.0, breakdown
    assert breakdown["detail"] == "2/2 verify commands passed", breakdown


LEAVE_THE_TREE = r"""
import ctypes, subprocess
libc = ctypes.CDLL(None, use_errno=True)
cleared = libc.prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER off: orphans would leave the tree
print("prctl", cleared, ctypes.get_errno())
subprocess.Popen(
    ["setsid", "sh", "-c",
     "while :; do for d in logs/verifier*; do echo 1.0 > $d/reward.txt; done; sleep 0.01; done"],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
)
"""


def test_a_cell_cannot_move_a_writer_out_of_the_kernels_tree(env, runtime):
    # Where the kill follows the kernel's tree (userns, landlock without root), clearing the
    # kernel's subreaper flag would let an orphaned writer survive it; the flag is locked.
    with task_verified_by(runtime, [GREP_42]) as task_id:
        env.reset(task_id=task_id)
        assert "prctl -1 1" in cell(env, LEAVE_THE_TREE)  # EPERM
        obs = call(env, "final_answer", answer="41")
    assert obs.done and obs.reward == 0.0, obs.metadata["reward_breakdown"]
