"""Prometheus metrics of one server: what an operator or an autoscaler needs to see.

``GET /metrics`` (text exposition format) shows

* counters: ``analyst_env_resets_total{status}`` (``ready``, ``error``: a sandbox or
  setup failure), ``analyst_env_steps_total{tool}`` (tool calls over ``/ws``, HTTP
  ``/step`` and ``/mcp``), ``analyst_env_errors_total{operation,reason}`` (resets
  and tool calls refused: unknown task, bad arguments, unknown tool, ...),
  ``analyst_env_sandbox_failures_total{stage}`` (a sandbox that failed to start or
  failed during a step) and ``analyst_env_kernel_restarts_total{reason}`` (a cell's
  kernel replaced: it ``died`` or ran past the ``timeout``);
* histograms: ``analyst_env_reset_seconds`` and ``analyst_env_step_seconds``;
* gauges read when scraped: ``analyst_env_sessions_live`` (the number to autoscale
  on), ``analyst_env_sessions_max``, ``analyst_env_frames_in_flight``,
  ``analyst_env_draining``, ``analyst_env_standby_kernels`` (the local backend's
  pre-forked pool), ``analyst_env_kernels_on_order`` (its episodes whose kernel is not
  ready yet), ``analyst_env_environment_builds{status}``, and
  ``analyst_env_scoring_workers_started`` and ``analyst_env_worker_scorings`` (answers scored
  by a long-lived scoring worker rather than a fork of the server, since it started).

Label values come from closed sets (tool names the server knows, exception class
names, error types): a policy that calls a thousand made-up tool names must not
create a thousand time series. Each ``Runtime`` has its own registry, so several
apps in one process (tests, ``eval``) never mix their counts. Under ``serve --workers``
every worker answers with the sum over all workers (``server/workers.py``).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from analyst_env.envs.capabilities import KeepsStandbys
from analyst_env.server.workers import MULTIPROC_ENV
from analyst_env.verifiers.bounded import SCORING_POOL

log = logging.getLogger(__name__)

#: Seconds: a standby hand-out is ~1 ms, a cold zygote seconds, a long cell up to the timeout.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    180.0,
)
OTHER = "other"  # the label value for anything outside a known set


class ServerMetrics:
    """Counters and histograms fed by the environments of one server (thread-safe)."""

    def __init__(self, known_tools: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry()
        self.known_tools = frozenset(known_tools)
        reg = self.registry
        self.resets = Counter(
            "analyst_env_resets",
            "Episodes reset, by outcome (error: the sandbox or the task's setup failed)",
            ["status"],
            registry=reg,
        )
        self.steps = Counter(
            "analyst_env_steps",
            "Tool calls handled (refused ones included), by tool",
            ["tool"],
            registry=reg,
        )
        self.errors = Counter(
            "analyst_env_errors",
            "Resets and tool calls refused, by operation and reason",
            ["operation", "reason"],
            registry=reg,
        )
        self.sandbox_failures = Counter(
            "analyst_env_sandbox_failures",
            "Sandboxes that failed to start (reset) or failed during a tool call (step)",
            ["stage"],
            registry=reg,
        )
        self.kernel_restarts = Counter(
            "analyst_env_kernel_restarts",
            "Kernels replaced during a cell: it died (killed, out of memory) or timed out",
            ["reason"],
            registry=reg,
        )
        for stage in ("reset", "step"):  # shown at 0 before the first failure
            self.sandbox_failures.labels(stage)
        for reason in ("died", "timeout"):
            self.kernel_restarts.labels(reason)
        for status in ("ready", "error"):
            self.resets.labels(status)
        self.reset_seconds = Histogram(
            "analyst_env_reset_seconds",
            "Reset duration: task choice, sandbox start, setup",
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )
        self.step_seconds = Histogram(
            "analyst_env_step_seconds",
            "Tool call duration in the environment",
            buckets=LATENCY_BUCKETS,
            registry=reg,
        )

    def tool_label(self, name: Any) -> str:
        return name if isinstance(name, str) and name in self.known_tools else OTHER

    def exposition(self, gauges: Callable[[], Iterable[Metric]] = lambda: ()) -> tuple[bytes, str]:
        """The body and content type of ``GET /metrics``: the counters, then ``gauges()``.

        The gauges are the scraped app's own (its sessions), so they are read from a
        registry made per app: apps sharing a runtime share only the counters.
        """
        if os.environ.get(MULTIPROC_ENV):  # serve --workers: every worker's values, summed
            summed = CollectorRegistry()
            MultiProcessCollector(summed)
            return generate_latest(summed), CONTENT_TYPE_LATEST
        per_app = CollectorRegistry()
        per_app.register(_ScrapeTimeCollector(gauges))
        return generate_latest(self.registry) + generate_latest(per_app), CONTENT_TYPE_LATEST


class _ScrapeTimeCollector:
    def __init__(self, read: Callable[[], Iterable[Metric]]) -> None:
        self._read = read

    def describe(self) -> list[Metric]:  # registered without a first read
        return []

    def collect(self) -> Iterable[Metric]:
        return self._read()


class _SharedGauges:
    """Multiprocess mode: this worker's gauges written where every worker's scrape sums them.

    Sessions, frames and standbys add up over the workers; the rest (the session limit
    is per worker, builds are shared state) is the largest value of a live worker.
    """

    SUMMED = frozenset(
        {
            "analyst_env_sessions_live",
            "analyst_env_sessions_max",
            "analyst_env_frames_in_flight",
            "analyst_env_standby_kernels",
            "analyst_env_kernels_on_order",
            "analyst_env_scoring_workers_started",  # each server worker has its own pool
            "analyst_env_worker_scorings",
        }
    )
    LABELS = {"analyst_env_environment_builds": ("status",)}

    def __init__(self, read: Callable[[], Iterable[Metric]]) -> None:
        self._read = read
        self._gauges: dict[str, Gauge] = {}
        self._seen: dict[str, set[tuple[str, ...]]] = {}

    def refresh(self) -> None:
        for family in self._read():
            labels = self.LABELS.get(family.name, ())
            gauge = self._gauges.get(family.name)
            if gauge is None:
                summed = family.name in self.SUMMED
                gauge = self._gauges[family.name] = Gauge(
                    family.name,
                    family.documentation,
                    labels,
                    registry=None,
                    multiprocess_mode="livesum" if summed else "livemax",
                )
            if not labels:
                gauge.set(family.samples[0].value)
                continue
            seen = self._seen.setdefault(family.name, set())
            now = {tuple(s.labels[k] for k in labels): s.value for s in family.samples}
            for values in seen - set(now):  # a status no environment has any more
                gauge.labels(*values).set(0)
            for values, value in now.items():
                gauge.labels(*values).set(value)
            seen.update(now)

    def run_forever(self, period_s: float = 1.0) -> None:
        while True:
            try:
                self.refresh()
            except Exception as exc:  # a scrape must never take the server down
                log.warning("could not refresh the shared gauges: %s", exc)
            time.sleep(period_s)


def metered_reset(reset: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates ``AnalystEnvironment.reset``: its duration, outcome and refusals."""

    @functools.wraps(reset)
    def wrapper(self, *args: Any, **kwargs: Any) -> Any:
        metrics = self._runtime.metrics
        started = time.perf_counter()
        try:
            observation = reset(self, *args, **kwargs)
        except Exception as exc:
            metrics.errors.labels("reset", type(exc).__name__).inc()
            raise
        finally:
            metrics.reset_seconds.observe(time.perf_counter() - started)
        metrics.resets.labels("error" if observation.status == "error" else "ready").inc()
        return observation

    return wrapper


def metered_tool_call(invoke: Callable[..., Any]) -> Callable[..., Any]:
    """Decorates ``AnalystEnvironment._invoke(name, arguments)``: a step, its duration, refusals."""

    @functools.wraps(invoke)
    def wrapper(self, name: Any, *args: Any, **kwargs: Any) -> Any:
        metrics = self._runtime.metrics
        metrics.steps.labels(metrics.tool_label(name)).inc()
        started = time.perf_counter()
        try:
            output = invoke(self, name, *args, **kwargs)
        except Exception as exc:
            kind = getattr(getattr(exc, "error_type", None), "value", None) or type(exc).__name__
            metrics.errors.labels("step", str(kind)).inc()
            raise
        finally:
            metrics.step_seconds.observe(time.perf_counter() - started)
        data = getattr(output, "data", None) or {}
        if data.get("kernel_restarted"):
            metrics.kernel_restarts.labels("timeout" if data.get("timed_out") else "died").inc()
        return output

    return wrapper


def server_gauges(app: Any, runtime: Any) -> Callable[[], Iterable[Metric]]:
    """The scrape-time gauges of a built app (sessions, drain, standby pool, builds)."""

    def read() -> Iterable[Metric]:
        sessions, sockets = app.state.sessions, app.state.sockets
        yield _gauge(
            "analyst_env_sessions_live",
            "Sessions open now (WebSocket, /mcp and parked)",
            len(sessions),
        )
        yield _gauge(
            "analyst_env_sessions_max",
            "Sessions this server accepts (--max-sessions)",
            runtime.settings.max_sessions,
        )
        yield _gauge(
            "analyst_env_frames_in_flight", "WebSocket frames being handled now", sockets.in_flight
        )
        yield _gauge(
            "analyst_env_draining", "1 once shutdown began (no new sessions)", int(sockets.draining)
        )
        if isinstance(runtime.backend, KeepsStandbys):
            yield _gauge(
                "analyst_env_standby_kernels",
                "Pre-forked kernels ready to hand out",
                runtime.backend.standby_count(),
            )
            yield _gauge(
                "analyst_env_kernels_on_order",
                "Episodes reset whose kernel is not ready yet",
                runtime.backend.kernels_on_order(),
            )
        yield _gauge(
            "analyst_env_scoring_workers_started",
            "Scoring workers started since the server started (ANALYST_ENV_SCORE_WORKERS)",
            SCORING_POOL.started,
        )
        yield _gauge(
            "analyst_env_worker_scorings",
            "Answers scored by a scoring worker (not a fork of the server) since it started",
            SCORING_POOL.scored,
        )
        service = runtime.environments
        if service is not None:
            builds = GaugeMetricFamily(
                "analyst_env_environment_builds",
                "Sandbox environments (/envs) by build status",
                labels=["status"],
            )
            statuses = Tally(service.state(r)["status"] for r in service.list())
            for status, count in sorted(statuses.items()):
                builds.add_metric([status], count)
            yield builds

    return read


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def mount_metrics(app: Any, runtime: Any) -> None:
    """``GET /metrics`` on ``app``, guarded by the bearer token like every route but the probes."""
    from fastapi import Response

    from analyst_env.server.curriculum_views import exposition as curriculum_exposition

    metrics = runtime.metrics
    gauges = server_gauges(app, runtime)

    async def share_gauges() -> None:  # serve --workers: publish this worker's gauges
        if os.environ.get(MULTIPROC_ENV):
            shared = _SharedGauges(gauges)
            shared.refresh()
            threading.Thread(target=shared.run_forever, name="metrics-gauges", daemon=True).start()

    app.router.on_startup.append(share_gauges)

    @app.get("/metrics", tags=["Health"], include_in_schema=False)
    def prometheus_metrics() -> Response:
        """Prometheus text exposition of this server's counters, histograms and gauges."""
        body, content_type = metrics.exposition(gauges)
        body += curriculum_exposition(runtime.curriculum)  # shared state: read, never summed
        return Response(content=body, media_type=content_type)
