"""The environment verify commands run in, and the check that the agent could not have faked it.

Verify commands (``Task.verify``) run after every process of the agent is gone
(``Sandbox.stop_agent_processes``), in a fresh process forked from the clean
template (the zygote or slot runner, which never ran agent code). They must
also not pick up anything the agent's cells set or planted: so they get this
module's fixed environment, never the kernel's (a ``PATH`` with the agent's
directory first, ``BASH_ENV``/``ENV`` naming a script, ``LD_PRELOAD``,
``PYTHONPATH``), and a command is refused if the agent could have written a
directory on that ``PATH`` or the interpreter's tree: a replaced ``grep`` or a
planted ``sitecustomize.py`` would then answer for the verifier.

Imported by the kernel process (``kernel.child``), so it depends on the standard
library only.
"""

from __future__ import annotations

import errno
import os
import secrets
import shlex
import sys
import sysconfig

_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR)

CLEAN_PATH = "/usr/local/bin:/usr/bin:/bin"
"""``PATH`` of verify commands: system directories only, never the working directory."""


def clean_env(home: str, extra: dict[str, str]) -> dict[str, str]:
    """The whole environment of one verify command.

    A fixed ``PATH`` (plus the directory of the sandbox's own Python, so ``python`` is the
    image's), ``HOME`` at ``home`` (the fresh verify directory: rc files and Python's user
    site-packages under a ``HOME`` the agent wrote would run), Python told not to put the
    working directory first on ``sys.path`` (a planted ``json.py`` there would shadow the
    standard library's) nor to read a user site, a UTF-8 locale, and ``extra``.

    pytest is told to take no configuration from above ``home`` (``PYTEST_ADDOPTS``: no ini
    file, ``home`` as its root and the limit of its ``conftest.py`` search): ``home`` lies in
    the working directory, so a ``pytest.ini`` and ``conftest.py`` the agent left there would
    otherwise be pytest's and could turn every failed test into a pass. A command that names
    its own ``-c``, ``--rootdir`` or ``--confcutdir`` overrides these (they come first).
    """
    pytest_opts = f"-c {os.devnull} --rootdir={shlex.quote(home)} --confcutdir={shlex.quote(home)}"
    interpreter_bin = os.path.dirname(sys.executable)
    system = CLEAN_PATH.split(":")
    path = CLEAN_PATH if interpreter_bin in system else f"{interpreter_bin}:{CLEAN_PATH}"
    return {
        "PATH": path,
        "HOME": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTEST_ADDOPTS": pytest_opts,
        **extra,
    }


def writable_trusted_dirs(env: dict[str, str]) -> list[str]:
    """The directories a verify command trusts (each on ``env["PATH"]``, ``/bin/sh``'s, the
    interpreter's prefix and site-packages) that this process can create a file in.

    A real probe, not ``access(2)``: a read-only mount, Landlock and seccomp answer it as they
    answered the agent (this process has the agent's uid and confinement). A probe that
    succeeds is removed at once.
    """
    dirs = [d for d in env.get("PATH", "").split(":") if d]
    dirs += [os.path.dirname(os.path.realpath("/bin/sh")), os.path.realpath(sys.prefix)]
    dirs.append(os.path.realpath(sysconfig.get_paths()["purelib"]))
    found = []
    for directory in dict.fromkeys(dirs):
        probe = os.path.join(directory, f".analyst-env-probe-{secrets.token_hex(8)}")
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as exc:
            if exc.errno not in _NOT_WRITABLE:
                found.append(directory)  # an unexpected answer is not proof it is safe
            continue
        os.close(fd)
        os.unlink(probe)
        found.append(directory)
    return found
