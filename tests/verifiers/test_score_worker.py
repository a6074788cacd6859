"""The long-lived scoring workers: limits per answer, a new worker after any failure, nothing
carried from one answer to the next that could change its reward, several threads, shutdown.

Each test starts real workers (``python -I -m analyst_env.verifiers.score_worker``) that
also import ``tests/worker_scorers.py``, the misbehaving scorers.
"""

from __future__ import annotations

import base64
import os
import pickle
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
import worker_scorers
from support import call

from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.bounded import SCORING_POOL, score_bounded
from analyst_env.verifiers.score_pool import ScoringPool
from analyst_env.verifiers.scoring_common import ScoringLimits

TESTS = str(Path(worker_scorers.__file__).parent)


@pytest.fixture
def pool():
    pool = ScoringPool(max_workers=2, imports=["worker_scorers"], paths=[TESTS])
    pool.warm()
    assert pool.started == 1
    yield pool
    pool.close()


MINUTE = ScoringLimits(timeout_s=60)


def score(pool, name, answer="x", limits=MINUTE, read_file=None):
    """A scoring by an idle worker of ``pool`` (warmed first if none is idle)."""
    pool.warm()
    job = (VerifierSpec(name=name), answer, None, {}, limits, read_file is not None)
    verdict = pool.score(job, limits, time.monotonic() + limits.timeout_s, read_file)
    assert verdict is not None, "no idle worker"
    return verdict


def pid_of(pool) -> str:
    return score(pool, "worker_pid").detail.split()[1]


def test_a_worker_scores_many_answers_in_one_clean_process(pool):
    first = pid_of(pool)
    assert first != str(os.getpid())
    assert [pid_of(pool) for _ in range(5)] == [first] * 5
    assert pool.started == 1


def test_the_memory_limit_ends_the_answer_and_the_worker_is_replaced(pool):
    before = pid_of(pool)
    verdict = score(pool, "worker_hog_memory", limits=ScoringLimits(memory_mb=256))
    assert verdict.reward == 0.0 and "memory" in verdict.detail
    assert pid_of(pool) != before


def test_the_cpu_limit_kills_the_worker_and_the_next_answer_gets_a_new_one(pool):
    before = pid_of(pool)
    verdict = score(pool, "worker_spin", limits=ScoringLimits(cpu_s=1, timeout_s=60))
    assert verdict.reward == 0.0 and "SIGXCPU" in verdict.detail, verdict.detail
    assert pid_of(pool) != before


def test_the_cpu_limit_is_per_answer_not_per_worker(pool):
    """CPU a worker spent on earlier answers is not charged to the next one."""
    limits = ScoringLimits(cpu_s=1, timeout_s=60)
    verdicts = [score(pool, "worker_burn", "0.7", limits=limits) for _ in range(3)]
    assert [v.reward for v in verdicts] == [1.0] * 3, verdicts
    assert len({v.detail for v in verdicts}) == 1  # one worker, 2.1 s of CPU in all


def test_the_wall_limit_kills_a_sleeping_scorer_and_its_worker(pool, tmp_path):
    before = pid_of(pool)
    verdict = score(
        pool, "worker_wait_for", str(tmp_path / "never"), limits=ScoringLimits(timeout_s=1)
    )
    assert verdict.reward == 0.0 and "longer than 1 s" in verdict.detail
    assert pid_of(pool) != before


def test_a_crashed_worker_is_a_0_with_the_reason_and_is_replaced(pool):
    before = pid_of(pool)
    verdict = score(pool, "worker_crash")
    assert verdict.reward == 0.0 and "SIGSEGV" in verdict.detail
    assert pid_of(pool) != before


def test_an_answer_leaves_nothing_that_reaches_the_next(pool):
    """After a failure the worker is replaced (its globals go with it); after a success it
    keeps them but the scorers hold none, and the directory and environment are restored."""
    cwd = os.getcwd()
    assert score(pool, "worker_poison", "a").detail == "left behind 1"
    assert pid_of(pool) == score(pool, "worker_pid").detail.split()[1]
    assert score(pool, "worker_pid").detail.endswith(f"cwd {cwd} env None")
    failed = score(pool, "worker_poison", "raise")
    assert failed.reward == 0.0 and "RuntimeError: poisoned" in failed.detail
    assert score(pool, "worker_poison", "b").detail == "left behind 1"  # a fresh worker


def test_files_are_read_through_the_server(pool):
    def read(name):
        if name != "a.txt":
            raise FileNotFoundError(name)
        return b"ok"

    assert score(pool, "worker_reads", "a.txt", read_file=read).reward == 1.0
    missing = score(pool, "worker_reads", "b.txt", read_file=read)
    assert missing.reward == 0.0 and "FileNotFoundError" in missing.detail


class _Planted:
    """Unpickled, it would create the file it names: what an agent's ``result.pkl`` could hold."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_pickle_looking_file_is_only_bytes_to_the_scorer(pool, tmp_path):
    planted = tmp_path / "planted"
    payload = pickle.dumps(_Planted(str(planted)))
    verdict = score(pool, "worker_reads", "result.pkl", read_file=lambda name: payload)
    assert verdict.reward == 0.0 and not planted.exists()  # compared as bytes, never loaded


ROGUE_WORKER = """
import base64, json, struct, sys
out = sys.stdout.buffer
def send(body):
    out.write(struct.pack(">I", len(body)) + body)
    out.flush()
send(json.dumps({"ready": {"numeric": "analyst_env.verifiers.scorers:numeric"}}).encode())
sys.stdin.buffer.read(4)
send(base64.b64decode(sys.argv[1]))  # a pickle, not JSON
"""


def test_the_server_never_unpickles_what_a_worker_sends(tmp_path):
    """A worker has parsed the agent's files: if a scorer bug let an answer take it over,
    its replies must still be data to the server."""
    planted = tmp_path / "planted"
    rogue = ScoringPool()
    rogue.command = [
        sys.executable,
        "-c",
        ROGUE_WORKER,
        base64.b64encode(pickle.dumps(_Planted(str(planted)))).decode(),
    ]
    rogue.warm()
    job = (VerifierSpec(name="numeric"), "1", 1, {}, MINUTE, False)
    verdict = rogue.score(job, MINUTE, time.monotonic() + 60, None)
    assert verdict is not None and verdict.reward == 0.0 and not planted.exists()
    assert "malformed reply" in verdict.detail
    rogue.close()


def test_a_busy_worker_never_holds_up_another_scoring(pool, tmp_path):
    release = tmp_path / "release"
    slow: list = []
    thread = threading.Thread(
        target=lambda: slow.append(score(pool, "worker_wait_for", str(release)))
    )
    thread.start()
    others = [score(pool, "worker_pid").reward for _ in range(5)]  # the second worker
    assert others == [1.0] * 5 and not slow
    release.touch()
    thread.join(60)
    assert slow[0].reward == 1.0


def test_scorings_from_several_threads_each_get_their_own_verdict(tmp_path):
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    con.close()
    SCORING_POOL.warm()
    spec = VerifierSpec(name="sql_execution", params={"db": "shop.sqlite"})
    results: dict[int, list[float]] = {}

    def scorings(n: int) -> None:
        # thread n's answer is right only for its own gold
        results[n] = [
            score_bounded(
                spec,
                f"SELECT count(*) + {n} FROM t",
                f"SELECT {100 + n}",
                ScoringLimits(timeout_s=60),
                task_files={"shop.sqlite": str(db)},
            ).reward
            for _ in range(4)
        ]

    threads = [threading.Thread(target=scorings, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert results == {n: [1.0] * 4 for n in range(4)}
    assert SCORING_POOL.started >= 1


def test_close_stops_idle_workers_and_busy_ones_when_they_finish(pool, tmp_path):
    idle = pool._idle[0].proc
    release = tmp_path / "release"
    busy: list = []
    thread = threading.Thread(
        target=lambda: busy.append(score(pool, "worker_wait_for", str(release)))
    )
    thread.start()
    while not busy and len(pool._idle) == 1 and pool._idle[0].proc is idle:
        time.sleep(0.01)  # until the scoring has taken the idle worker
    pool.close()
    release.touch()
    thread.join(60)
    assert busy[0].reward == 1.0
    assert idle.poll() is not None and pool._idle == []
    assert score(pool, "worker_pid").reward == 1.0  # started again on demand


def test_a_pool_whose_workers_cannot_start_leaves_scoring_to_the_fork():
    pool = ScoringPool(imports=["no_such_module_for_scoring"])
    pool.warm()
    job = (VerifierSpec(name="numeric"), "1", 1, {}, ScoringLimits(), False)
    assert (
        pool.started == 0 and pool.score(job, ScoringLimits(), time.monotonic() + 5, None) is None
    )
    assert not pool.runs("numeric", object())


def test_a_worker_runs_a_scorer_only_if_the_server_has_the_same_one():
    from analyst_env.verifiers.scorers import SCORERS

    SCORING_POOL.warm()
    assert SCORING_POOL.runs("sql_execution", SCORERS["sql_execution"])
    assert not SCORING_POOL.runs("sql_execution", worker_scorers.worker_pid)  # replaced here
    assert not SCORING_POOL.runs("worker_pid", worker_scorers.worker_pid)  # not in its imports


def test_an_episode_s_sql_answer_is_scored_by_a_worker(env, runtime):
    task = runtime.task("tiny-sqlite")
    spec = VerifierSpec(name="sql_execution", params={"db": "shop.sqlite"})
    runtime._by_id[task.id] = task.model_copy(update={"verifier": spec, "answer": "SELECT 9"})
    try:
        SCORING_POOL.warm()
        before = SCORING_POOL.scored
        env.reset(task_id=task.id)
        assert call(env, "final_answer", answer="SELECT 4 + 5").reward == 1.0
        env.reset(task_id=task.id)
        assert call(env, "final_answer", answer="SELECT 8").reward == 0.0
        assert SCORING_POOL.scored == before + 2
    finally:
        runtime._by_id[task.id] = task


def test_a_server_with_score_workers_0_scores_every_answer_in_a_fork(tmp_path):
    """``ANALYST_ENV_SCORE_WORKERS=0``: the server's pool starts no worker, answers are still
    scored (each in a forked child)."""
    from analyst_env.server.local_server import serving
    from analyst_env.server.settings import Settings

    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
    con.close()
    spec = VerifierSpec(name="sql_execution", params={"db": "shop.sqlite"})
    settings = Settings.from_env(
        {"ANALYST_ENV_SCORE_WORKERS": "0", "ANALYST_ENV_STATE_DIR": str(tmp_path / "state")}
    )
    SCORING_POOL.close()  # no idle worker left from an earlier test
    try:
        with serving(settings, sessions=2):
            assert SCORING_POOL.max_workers == 0
            started, scored = SCORING_POOL.started, SCORING_POOL.scored
            verdicts = [
                score_bounded(
                    spec, answer, "SELECT 9", MINUTE, task_files={"shop.sqlite": str(db)}
                ).reward
                for answer in ("SELECT 4 + 5", "SELECT 8", "SELECT 9")
            ]
            time.sleep(0.5)  # a worker started in the background would be counted by now
            assert verdicts == [1.0, 0.0, 1.0]
            assert (SCORING_POOL.started, SCORING_POOL.scored) == (started, scored)
    finally:
        SCORING_POOL.max_workers = Settings().score_workers


def test_a_server_holding_over_1024_descriptors_still_scores_in_workers():
    """A server with many sessions has descriptors past ``select``'s 1024."""
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    pool = ScoringPool(imports=["worker_scorers"], paths=[TESTS])
    try:
        assert score(pool, "worker_pid").reward == 1.0
        assert pool._idle[0].proc.stdout.fileno() > 1024
    finally:
        pool.close()
        for fd in held:
            os.close(fd)


KILLED_SERVER = """
import os, sys, threading, time
sys.path.insert(0, {tests!r})
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers.score_pool import ScoringPool
from analyst_env.verifiers.scoring_common import ScoringLimits
pool = ScoringPool(imports=["worker_scorers"], paths=[{tests!r}])
pool.warm()
print(pool._idle[0].proc.pid, flush=True)
job = (VerifierSpec(name="worker_wait_for"), {never!r}, None, {{}}, ScoringLimits(), False)
deadline = time.monotonic() + 600
threading.Thread(target=pool.score, args=(job, ScoringLimits(), deadline, None)).start()
time.sleep(1)
os.kill(os.getpid(), 9)
"""


def test_a_worker_busy_when_the_server_is_killed_does_not_outlive_it(tmp_path):
    import subprocess

    script = KILLED_SERVER.format(tests=TESTS, never=str(tmp_path / "never"))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    worker = int(out.stdout.split()[0])
    gone_by = time.monotonic() + 30
    while time.monotonic() < gone_by and _alive(worker):
        time.sleep(0.2)
    assert not _alive(worker)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
