"""Model-style cells that try to get a verify command's reward without the answer.

Issue 32, item 2: a fake ``grep`` first on the kernel's ``PATH``, background
writers of ``reward.txt`` that outlive the cell, and environment variables that
shells and interpreters read at start. ``tests/verifiers/test_verify_unreachable.py``
plays them in-process; ``tests/sandbox/test_published_layouts.py`` plays them
against an installed wheel's server.
"""

from __future__ import annotations

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
