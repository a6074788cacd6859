"""Sandbox and gold-leak probes: model-style attacks over the protocol against any running server.

The same probes run against the published image (tests/image) and can run against a
local server: a ``Target`` says where the server is and what, on the server's side, a
cell must not reach (its token, package source, task cache, trajectories, listening
addresses). Each probe opens its own session, runs cells as a model would write them,
and raises ``AssertionError`` naming what got through. Cells never receive a secret:
they look for it the way an attacker would (by variable name, by path), and the
harness checks their output for the real value.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
from leak_probes import leaks, parse, probe_code

from analyst_env.client import AnalystEnv
from analyst_env.evaluation.validation import validate_task

# A starter task whose answer a model computes with pandas from its CSV file.
EPISODE_TASK = "starter-sales-000"
EPISODE_CELLS = [
    "import pandas as pd\ndf = pd.read_csv('sales.csv')\nprint(df.shape)\ndf.head()",
    "df['order_date'] = pd.to_datetime(df['order_date'])\n"
    "west = df[(df['region'] == 'West') & (df['order_date'].dt.year == 2022)]\n"
    "print(round(float(west['revenue'].sum()), 2))",
]
# One task of each kind for the gold-leak check (oracle 1, null 0, repeatable, no leak).
LEAK_TASKS = ["starter-sales-000", "starter-retail-000", "starter-financials-000"]


@dataclass
class Target:
    """A running server and what of its side a sandboxed cell must not reach.

    ``exists_on_server(path)`` looks at the server's own filesystem (e.g. through
    ``docker exec``), so a write that a private mount swallowed is told apart from
    one that landed; ``server_alive()`` says whether the server process still runs.
    """

    url: str
    token: str | None
    secret_paths: list[str]
    listen_addresses: list[tuple[str, int]]
    protected_write_dirs: list[str]
    exists_on_server: Callable[[str], bool] | None = None
    server_alive: Callable[[], bool] = lambda: True
    task_id: str = EPISODE_TASK
    leak_task_ids: list[str] = field(default_factory=lambda: list(LEAK_TASKS))

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def session(self):
        return AnalystEnv(base_url=self.url, headers=self.headers, message_timeout_s=120).sync()


def cell(env, code: str) -> str:
    return env.add_and_execute_code_cell(code).observation.text


def shell(env, command: str) -> str:
    return env.execute_shell_command(command).observation.text


def json_cell(env, code: str) -> dict:
    """Run ``code`` that ends by printing one JSON object; return it."""
    out = cell(env, code)
    last = [line for line in out.splitlines() if line.startswith("{")]
    assert last, f"the probe cell printed no JSON: {out[:1500]}"
    return json.loads(last[-1])


def wait_healthy(target: Target, timeout_s: float = 120.0) -> None:
    """Wait for ``/health``; raise AssertionError if it does not answer healthy in time.

    Gives up at once when ``target.server_alive()`` says the server process is gone.
    """
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    while time.monotonic() < deadline:
        if not target.server_alive():
            raise AssertionError(f"the server process is gone (last /health: {last})")
        try:
            r = httpx.get(target.url + "/health", timeout=5)
            if r.status_code == 200 and r.json().get("status") == "healthy":
                return
            last = f"{r.status_code} {r.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(0.5)
    raise AssertionError(f"server not healthy after {timeout_s:.0f} s: {last}")


# ── the probes ───────────────────────────────────────────────────────────────
def probe_health_and_auth(target: Target) -> None:
    """/health is open; every other route needs the token."""
    wait_healthy(target)
    if target.token:
        assert httpx.get(target.url + "/sandbox", timeout=10).status_code == 401
        assert (
            httpx.get(
                target.url + "/sandbox", headers={"Authorization": "Bearer wrong"}, timeout=10
            ).status_code
            == 401
        )


def sandbox_report(target: Target) -> dict:
    r = httpx.get(target.url + "/sandbox", headers=target.headers, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def probe_episode_scores(target: Target) -> None:
    """A model-style episode: pandas on the task file, then final_answer scores it 1.0."""
    with target.session() as env:
        first = env.reset(task_id=target.task_id, seed=0)
        assert "sales.csv" in [f.name for f in first.observation.files]
        out = cell(env, EPISODE_CELLS[0])
        assert "order_id" in out and "Traceback" not in out, out
        out = cell(env, EPISODE_CELLS[1])
        numbers = re.findall(r"-?\d+\.\d+", out)
        assert numbers, out
        done = env.final_answer(numbers[-1])
        assert done.done is True
        assert done.reward == 1.0, done.observation.text


TOKEN_CELL = r"""
import os, glob, json
names = ('TOKEN', 'SECRET', 'KEY', 'PASSWORD')
found, readable = [], []
def scan(label, text):
    for line in text.replace('\0', '\n').splitlines():
        key, _, value = line.partition('=')
        if value and any(n in key.upper() for n in names):
            found.append((label, key, value))
    args = text.split('\0')
    for i, a in enumerate(args[:-1]):
        if a in ('--token', '--api-key'):
            found.append((label, a, args[i + 1]))
scan('os.environ', '\n'.join(f'{k}={v}' for k, v in os.environ.items()))
for path in ['/proc/1/environ', '/proc/1/cmdline', '/proc/self/environ'] + sorted(
        glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline')):
    try:
        with open(path, 'rb') as f:
            scan(path, f.read().decode('utf-8', 'replace'))
        readable.append(path)
    except OSError:
        pass
print(json.dumps({'found': found,
                  'readable': [p for p in readable if not p.startswith('/proc/self')][:40]}))
"""


def probe_token_unreadable(target: Target) -> None:
    """No cell or shell command can see the server's token (environment, /proc of any process)."""
    assert target.token, "the probe needs a server with a token"
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        report = json_cell(env, TOKEN_CELL)
        out = json.dumps(report)
        assert target.token not in out, (
            f"the token is readable: {[f[:2] for f in report['found'] if target.token in f[2]]}"
        )
        sh = shell(
            env,
            "env; cat /proc/1/environ; tr '\\0' '\\n' </proc/1/environ; ps aux "
            "2>/dev/null; cat /proc/*/cmdline",
        )
        assert target.token not in sh, "a shell command reads the token"


IMPORT_CELL = r"""
import json, sys
results = {}
for stmt in ['import analyst_env.datasets',
             'from analyst_env.datasets.starter_set import load_starter',
             'import analyst_env.server.settings', 'import analyst_env.verifiers']:
    try:
        exec(stmt, {})
        results[stmt] = 'imported'
    except BaseException as e:
        results[stmt] = type(e).__name__
loaded = sorted(m for m in sys.modules if m.startswith('analyst_env.') and
                m.split('.')[1] in ('datasets', 'server', 'verifiers', 'client'))
print(json.dumps({'imports': results, 'loaded': loaded}))
"""


def probe_server_code_unimportable(target: Target) -> None:
    """The server's code (task generator, gold, scorers) cannot be imported or found loaded."""
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        report = json_cell(env, IMPORT_CELL)
        imported = [stmt for stmt, outcome in report["imports"].items() if outcome == "imported"]
        assert not imported, f"a cell imports the server's code: {imported}"
        assert not report["loaded"], f"server modules are loaded in the kernel: {report['loaded']}"


READ_CELL = r"""
import json, os
paths = {paths!r}
seen = {{}}
for top in paths:
    got = []
    try:
        got.append('listed %d' % len(os.listdir(top)))
    except OSError as e:
        got.append(type(e).__name__)
    n = 0
    for root, dirs, files in os.walk(top):
        for name in files:
            try:
                with open(os.path.join(root, name), 'rb') as f:
                    f.read(64)
                n += 1
            except OSError:
                pass
        if n >= 5:
            break
    got.append('read %d' % n)
    seen[top] = got
print(json.dumps(seen))
"""


def probe_server_files_unreadable(target: Target) -> None:
    """The package source, the task cache and the trajectories are out of a cell's sight."""
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        seen = json_cell(env, READ_CELL.format(paths=target.secret_paths))
        exposed = {
            p: got for p, got in seen.items() if got[0].startswith("listed") or got[1] != "read 0"
        }
        assert not exposed, f"server files are readable from a cell: {exposed}"
        listing = "".join(
            f'ls -A "{p}" >/dev/null 2>&1 && echo "LISTED {p}"; ' for p in target.secret_paths
        )
        sh = shell(env, listing + "echo END")
        assert "END" in sh and "LISTED" not in sh, f"a shell command lists server files: {sh}"


def probe_hostile_policy_finds_nothing(target: Target) -> None:
    """The project's leak probes (tests/leak_probes.py): server code, package source, cache, state,
    token."""
    assert target.token, "the probe needs a server with a token"
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        # No hidden paths here: under Landlock they exist but cannot be read, which
        # probe_server_files_unreadable checks; leak_probes counts mere existence.
        found = leaks(parse(cell(env, probe_code(target.token, []))))
        assert not found, f"a hostile policy's first cell reaches: {found}"


def probe_gold_does_not_leak(target: Target) -> None:
    """The project's own leak check over the protocol: oracle 1, null 0, repeatable, no gold
    shown."""
    from analyst_env.datasets.starter_set import load_starter

    tasks = {t.id: t for t in load_starter().tasks}
    for task_id in target.leak_task_ids:
        row = asyncio.run(validate_task(target.url, tasks[task_id], headers=target.headers))
        assert row["status"] == "pass", row


NETWORK_CELL = r"""
import json, socket, threading
results = {{}}
for host, port in {addresses!r}:
    try:
        socket.create_connection((host, port), timeout=1).close()
        results['%s:%d' % (host, port)] = 'connected'
    except OSError as e:
        results['%s:%d' % (host, port)] = type(e).__name__
def resolve(name):
    try:
        socket.getaddrinfo(name, 443)
        results['dns ' + name] = 'resolved'
    except OSError as e:
        results['dns ' + name] = type(e).__name__
for name in ['pypi.org', 'deb.debian.org']:
    t = threading.Thread(target=resolve, args=(name,), daemon=True)
    t.start()
    t.join(6)  # a resolver that cannot reach its server waits out resolv.conf's timeouts
    results.setdefault('dns ' + name, 'timed out')
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b'x', ('1.1.1.1', 53))
    results['udp'] = 'sent'
except OSError as e:
    results['udp'] = type(e).__name__
print(json.dumps(results))
"""


def probe_no_network(target: Target) -> None:
    """No TCP connection to the server's own listening addresses or beyond, no DNS, no UDP out."""
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        results = json_cell(
            env, NETWORK_CELL.format(addresses=target.listen_addresses + [("1.1.1.1", 443)])
        )
        through = {k: v for k, v in results.items() if v in ("connected", "resolved", "sent")}
        assert not through, f"the network is reachable from a cell: {through}"
        sh = shell(
            env,
            'python3 -c "import urllib.request as u; '
            "u.urlopen('http://127.0.0.1:8000/health', timeout=3); print('REACHED')\" 2>&1 "
            "| tail -1",
        )
        assert "REACHED" not in sh


WRITE_CELL = r"""
import json, os, tempfile
marker = {marker!r}
results = {{}}
for d in {dirs!r} + ['/tmp', os.getcwd(), tempfile.gettempdir()]:
    path = os.path.join(d, marker)
    try:
        with open(path, 'w') as f:
            f.write('x')
        results[d] = 'written'
    except OSError as e:
        results[d] = type(e).__name__
results['cwd'], results['tmp'] = os.getcwd(), tempfile.gettempdir()
print(json.dumps(results))
"""


def probe_writes_confined(target: Target) -> None:
    """A cell writes its working directory and its temp directory, nothing else of the server's.

    ``/tmp`` itself may be the episode's own (a private mount) or refused (Landlock,
    where the episode's temp directory is ``$TMPDIR``); either way nothing written
    there may land in the server's ``/tmp``.
    """
    marker = f"probe-write-{time.time_ns()}"
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        results = json_cell(env, WRITE_CELL.format(marker=marker, dirs=target.protected_write_dirs))
        cwd, tmp = results.pop("cwd"), results.pop("tmp")
        assert results.pop(cwd) == "written", "the cell cannot write its working directory"
        assert results.pop(tmp, results.get("/tmp")) == "written", (
            f"the cell cannot write its temp directory {tmp}"
        )
        results.pop("/tmp", None)
        written = [d for d, outcome in results.items() if outcome == "written"]
        assert not written, f"a cell writes outside its working and temp directories: {written}"
        if target.exists_on_server is not None:
            landed = [
                d
                for d in [*target.protected_write_dirs, "/tmp"]
                if target.exists_on_server(f"{d.rstrip('/')}/{marker}")
            ]
            assert not landed, (
                f"files written by a cell landed on the server's filesystem: {landed}"
            )


def probe_other_episode_unreachable(target: Target) -> None:
    """One episode cannot read another's files or environment, nor signal it."""
    with target.session() as victim, target.session() as attacker:
        victim.reset(task_id=target.task_id, seed=0)
        attacker.reset(task_id=target.task_id, seed=0)
        cell(victim, "open('secret.txt', 'w').write('victim-s3cret')")
        victim_pid = int(cell(victim, "import os; os.getpid()"))
        victim_dir = cell(victim, "os.getcwd()").strip("'")
        seen = json_cell(
            attacker,
            "import json, os, signal, glob\nseen = {}\n"
            f"for path in ['/proc/{victim_pid}/cwd/secret.txt', '{victim_dir}/secret.txt', "
            f"'/proc/{victim_pid}/environ']:\n"
            "    try:\n        seen[path] = open(path).read()[:40]\n"
            "    except OSError as e:\n        seen[path] = type(e).__name__\n"
            "hits = []\n"
            "for path in glob.glob('/proc/[0-9]*/cwd/secret.txt'):\n"
            "    try:\n        hits.append(open(path).read()[:40])\n"
            "    except OSError:\n        pass\n"
            "seen['scan'] = hits\n"
            # In a PID namespace of its own the victim's pid may name one of the attacker's
            # own processes (itself, or an ancestor): killing that proves nothing, and ends
            # the attacker's cell. Such a pid is left alone and recorded as "own".
            "own, pid = set(), os.getpid()\n"
            "while pid > 1 and pid not in own:\n"
            "    own.add(pid)\n"
            "    try:\n"
            "        status = open(f'/proc/{pid}/status').read()\n"
            "        pid = int(status.split('PPid:')[1].split()[0])\n"
            "    except (OSError, IndexError, ValueError):\n"
            "        break\n"
            f"if {victim_pid} in own or {victim_pid} == 1:\n    seen['kill'] = 'own'\n"
            f"else:\n    try:\n        os.kill({victim_pid}, signal.SIGKILL)\n"
            "        seen['kill'] = 'KILLED'\n"
            "    except OSError as e:\n        seen['kill'] = type(e).__name__\n"
            "print(json.dumps(seen))",
        )
        assert "victim-s3cret" not in json.dumps(seen), (
            f"another episode's file is readable: {seen}"
        )
        assert seen["kill"] != "KILLED", "another episode's kernel can be killed"
        assert cell(victim, "open('secret.txt').read()") == "'victim-s3cret'"


def probe_server_survives_kill_attempts(target: Target) -> None:
    """SIGTERM/SIGKILL to PID 1, to every process (kill -9 -1) and to the parent: the server stays
    up."""
    with target.session() as env:
        env.reset(task_id=target.task_id, seed=0)
        out = json_cell(
            env,
            "import json, os, signal\nresults = {}\n"
            "for label, pid, sig in [('pid1 TERM', 1, signal.SIGTERM), ('pid1 KILL', 1, "
            "signal.SIGKILL),\n"
            "                        ('parent TERM', os.getppid(), signal.SIGTERM)]:\n"
            "    try:\n        os.kill(pid, sig); results[label] = 'sent'\n"
            "    except OSError as e:\n        results[label] = type(e).__name__\n"
            "print(json.dumps(results))",
        )
        try:
            shell(env, "kill -TERM -1; kill -9 -1")
        except Exception:  # the episode itself may be gone: that is allowed, the server is not
            pass
    time.sleep(2)
    assert target.server_alive(), f"the server process died after a cell's kill attempts ({out})"
    wait_healthy(target, timeout_s=30)
    probe_episode_scores(target)  # and a fresh session works


PROBES = [
    probe_health_and_auth,
    probe_episode_scores,
    probe_gold_does_not_leak,
    probe_hostile_policy_finds_nothing,
    probe_token_unreadable,
    probe_server_code_unimportable,
    probe_server_files_unreadable,
    probe_no_network,
    probe_writes_confined,
    probe_other_episode_unreachable,
    probe_server_survives_kill_attempts,  # last: if it fails, the server may be gone
]
