"""Scoring is bounded: the answer-size cap, a child process with limits, and files read safely.

The scorers registered here (and ``tests/worker_scorers.py``'s) exist in this process only, so
they are scored in a forked child: these tests hold the fork path; ``test_score_worker.py``
holds the long-lived workers.

A final_answer must cost the server a small, fixed amount whatever the agent
submits or leaves in its working directory, and must always end the episode.
"""

from __future__ import annotations

import resource
import sqlite3
import threading
import time

import worker_scorers  # noqa: F401 - registers the misbehaving scorers, in this process only
from support import call

from analyst_env.server.episode import Limits
from analyst_env.server.settings import Settings
from analyst_env.server.verification import answer_too_large
from analyst_env.task_format import VerifierSpec
from analyst_env.verifiers import Verdict, register
from analyst_env.verifiers.bounded import (
    FORK_ATTEMPTS,
    IN_PROCESS_SCORERS,
    ScoringLimits,
    score_bounded,
)


@register("test_raise")
def _raise(submitted, gold):
    raise RuntimeError("scorer bug")


def test_a_scorer_that_eats_memory_scores_0_and_the_server_keeps_its_memory():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    verdict = score_bounded(
        VerifierSpec(name="worker_hog_memory"), "x", None, ScoringLimits(memory_mb=256)
    )
    assert verdict.reward == 0.0 and "memory" in verdict.detail
    assert (
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100_000
    )  # KiB: the child paid


def test_a_scorer_that_never_returns_is_stopped_at_the_wall_time_limit():
    started = time.monotonic()
    verdict = score_bounded(
        VerifierSpec(name="worker_spin"), "x", None, ScoringLimits(timeout_s=1.5)
    )
    assert verdict.reward == 0.0 and "longer than 1.5 s" in verdict.detail
    assert time.monotonic() - started < 10


def test_a_scorer_exception_is_a_0_with_the_reason():
    verdict = score_bounded(VerifierSpec(name="test_raise"), "x", None, ScoringLimits())
    assert verdict.reward == 0.0 and "RuntimeError: scorer bug" in verdict.detail


def test_files_are_read_through_the_parent():
    files = {"a.txt": b"ok"}

    def read(name):
        if name not in files:
            raise FileNotFoundError(name)
        return files[name]

    assert (
        score_bounded(
            VerifierSpec(name="worker_reads"), "a.txt", None, ScoringLimits(), read_file=read
        ).reward
        == 1.0
    )
    missing = score_bounded(
        VerifierSpec(name="worker_reads"), "b.txt", None, ScoringLimits(), read_file=read
    )
    assert missing.reward == 0.0 and "FileNotFoundError" in missing.detail


def test_the_answer_cap_is_a_setting_and_reaches_the_verdict():
    assert Settings.from_env({"ANALYST_ENV_MAX_ANSWER_BYTES": "1000"}).max_answer_bytes == 1000
    assert Settings.from_env({}).max_answer_bytes == 65_536
    limits = Limits(max_answer_bytes=10)
    assert answer_too_large("0123456789", limits) is None
    refused = answer_too_large("é" * 6, limits)  # 12 bytes in UTF-8
    assert refused.reward == 0.0 and "12 bytes, over the limit of 10 bytes" in refused.detail


def test_a_10_mb_answer_is_refused_without_parsing_and_ends_the_episode(env):
    env.reset(task_id="tiny-csv")
    started = time.monotonic()
    obs = call(env, "final_answer", answer="[" * 10_000_000)
    assert time.monotonic() - started < 5
    assert obs.done and obs.reward == 0.0
    assert "over the limit of 65536 bytes" in obs.metadata["reward_breakdown"]["detail"]
    assert "It was not scored" in obs.text  # the agent is told why, in the reply itself
    assert len(str(obs.result)) < 10_000
    assert len(env.state.submitted_answer) == 1000  # kept in the state and on disk: a head


def test_a_symlinked_result_file_scores_0_and_ends_the_episode(env, runtime):
    task = runtime.task("tiny-csv")
    file_task = task.model_copy(update={"verifier": VerifierSpec(name="worker_reads")})
    runtime._by_id[task.id] = file_task
    try:
        env.reset(task_id=task.id)
        call(
            env, "execute_shell_command", command="printf ok > real.txt && ln -s real.txt link.txt"
        )
        obs = call(env, "final_answer", answer="link.txt")
        assert obs.done and obs.reward == 0.0
        assert "symbolic link" in obs.metadata["reward_breakdown"]["detail"]
        env.reset(task_id=task.id)
        call(env, "execute_shell_command", command="printf ok > real.txt")
        assert call(env, "final_answer", answer="real.txt").reward == 1.0
    finally:
        runtime._by_id[task.id] = task


def test_the_memory_limit_is_on_top_of_what_the_server_already_holds():
    ballast = bytearray(300 * 1024 * 1024)  # the server's own heap, inherited by the fork
    ballast[::4096] = b"x" * len(ballast[::4096])
    verdict = score_bounded(VerifierSpec(name="numeric"), "42", 42, ScoringLimits(memory_mb=200))
    assert verdict.reward == 1.0, verdict.detail
    del ballast


@register("test_where")
def _where(submitted, gold):
    import os

    return Verdict(1.0, {}, str(os.getpid()))


def test_short_text_answers_skip_the_fork_and_everything_else_keeps_it(monkeypatch):
    import os

    from analyst_env.verifiers import scorers

    monkeypatch.setitem(
        scorers.SCORERS, "numeric", _where
    )  # a text scorer that reports where it ran
    limits = ScoringLimits()
    here = str(os.getpid())
    assert (
        score_bounded(
            VerifierSpec(name="numeric"), "1" * limits.in_process_max_bytes, 1, limits
        ).detail
        == here
    )
    longer = score_bounded(
        VerifierSpec(name="numeric"), "1" * (limits.in_process_max_bytes + 1), 1, limits
    )
    assert longer.reward == 1.0 and longer.detail != here
    assert (
        score_bounded(VerifierSpec(name="test_where"), "1", 1, limits).detail != here
    )  # not a known text scorer
    never = ScoringLimits(in_process_max_bytes=0)
    assert score_bounded(VerifierSpec(name="numeric"), "1", 1, never).detail != here
    assert "sql_execution" not in IN_PROCESS_SCORERS and "workbook_match" not in IN_PROCESS_SCORERS


SERVER_LOCK = threading.Lock()  # stands for any lock a server thread holds when the scorer forks


@register("test_takes_server_lock")
def _takes_server_lock(submitted, gold):
    with SERVER_LOCK:
        return 1.0


def test_a_child_stuck_on_a_lock_held_in_the_server_at_fork_time_is_forked_again():
    SERVER_LOCK.acquire()
    threading.Timer(0.5, SERVER_LOCK.release).start()  # its holder lets go soon, in the server
    started = time.monotonic()
    verdict = score_bounded(
        VerifierSpec(name="test_takes_server_lock"), "x", None, ScoringLimits(timeout_s=30)
    )
    assert verdict.reward == 1.0, verdict.detail
    assert time.monotonic() - started < 15


def test_a_child_stuck_every_time_scores_0_with_the_reason_before_the_time_limit():
    with SERVER_LOCK:
        started = time.monotonic()
        verdict = score_bounded(
            VerifierSpec(name="test_takes_server_lock"), "x", None, ScoringLimits(timeout_s=60)
        )
    assert verdict.reward == 0.0
    assert f"stuck on a lock it inherited from the server {FORK_ATTEMPTS} times" in verdict.detail
    assert time.monotonic() - started < 30


def test_sql_scoring_while_server_threads_use_sqlite_always_gets_its_verdict(tmp_path):
    db = tmp_path / "shop.sqlite"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(2000)])
    con.close()
    stop = threading.Event()

    def previews() -> None:  # what resets do in the server: read task databases
        while not stop.is_set():
            reader = sqlite3.connect(db)
            reader.execute("SELECT sum(a), group_concat(a) FROM t").fetchall()
            reader.close()

    threading.Thread(target=previews, daemon=True).start()
    spec = VerifierSpec(name="sql_execution", params={"db": "shop.sqlite"})
    try:
        verdicts = [
            score_bounded(
                spec,
                "SELECT count(*) FROM t",
                "SELECT count(a) FROM t",
                ScoringLimits(timeout_s=30),
                task_files={"shop.sqlite": str(db)},
            )
            for _ in range(20)
        ]
    finally:
        stop.set()
    assert [v.detail for v in verdicts if v.reward != 1.0] == []
