"""Several servers behind one client: new episodes go to the least-loaded, and skip dead ones.

A training run that outgrows one server runs several replicas (``deploy/``). A load
balancer in front of them is one way to spread sessions; this is the other, with no
extra moving part: give the client every replica, as a list or one comma-separated
string (``"http://a:8000,http://b:8000"``). Each new episode's connection goes to
the replica with the most free session slots, as its ``/ready`` reports them (probed
at most once a second, and counting the episodes this process sent it since), and
fails over to the next on a connection error or a full server. An episode, once
started, stays on its replica: its kernel and files live there (a dropped connection
is resumed on the same replica, ``client/resume.py``).

Example:
    >>> split_urls("http://a:8000/, http://b:8000")
    ['http://a:8000', 'http://b:8000']
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import httpx

PROBE_TTL_S = 1.0
"""How long a replica's ``/ready`` answer is trusted."""
DOWN_FOR_S = 10.0
"""How long a replica that refused a connection is tried only after the others."""


def split_urls(base_url: str | Sequence[str]) -> list[str]:
    """The server URLs in ``base_url``: a list, or one string of comma-separated URLs."""
    parts = base_url.split(",") if isinstance(base_url, str) else list(base_url)
    urls = [u.strip().rstrip("/") for u in parts if u and u.strip()]
    if not urls:
        raise ValueError("no server URL given")
    return urls


class EndpointPool:
    """The replicas one process spreads its episodes over (shared by every client of the same
    URLs in the process, see :meth:`shared`)."""

    _shared: dict[tuple[str, tuple[str, ...]], EndpointPool] = {}
    _shared_lock = threading.Lock()

    def __init__(self, urls: Sequence[str], headers: dict[str, str] | None = None) -> None:
        self.urls = list(urls)
        self.headers = dict(headers or {})
        self._lock = threading.Lock()
        self._free: dict[str, int] = {}  # free slots at the last probe, minus episodes sent since
        self._probed_at = 0.0
        self._down_until: dict[str, float] = {}
        self._turn = 0  # round robin among equals

    @classmethod
    def shared(cls, urls: Sequence[str], headers: dict[str, str] | None = None) -> EndpointPool:
        key = (repr(sorted((headers or {}).items())), tuple(urls))
        with cls._shared_lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = cls(urls, headers)
            return pool

    def order(self) -> list[str]:
        """The replicas to try for a new episode, best first (down ones last)."""
        if len(self.urls) == 1:
            return list(self.urls)
        self._refresh()
        now = time.monotonic()
        with self._lock:
            self._turn += 1
            turn = self._turn
            n = len(self.urls)

            def rank(item: tuple[int, str]) -> tuple[bool, int, int]:
                i, url = item
                down = self._down_until.get(url, 0.0) > now
                return (down, -self._free.get(url, 0), (i - turn) % n)

            return [url for _, url in sorted(enumerate(self.urls), key=rank)]

    def sent(self, url: str) -> None:
        """An episode was started on ``url``: one slot fewer until the next probe."""
        with self._lock:
            self._free[url] = self._free.get(url, 0) - 1
            self._down_until.pop(url, None)

    def failed(self, url: str) -> None:
        """``url`` refused a connection or was full: try it after the others for a while."""
        with self._lock:
            self._down_until[url] = time.monotonic() + DOWN_FOR_S
            self._free[url] = min(self._free.get(url, 0), 0)

    def _refresh(self) -> None:
        with self._lock:
            if time.monotonic() - self._probed_at < PROBE_TTL_S:
                return
            self._probed_at = time.monotonic()
        with ThreadPoolExecutor(len(self.urls)) as pool:
            found = dict(zip(self.urls, pool.map(self._probe, self.urls), strict=True))
        with self._lock:
            self._free = found

    def _probe(self, url: str) -> int:
        """Free session slots of ``url`` (0 when full, draining, unreachable or unknown)."""
        try:
            ready = httpx.get(f"{url}/ready", headers=self.headers, timeout=1.0)
            body = ready.json()
        except (httpx.HTTPError, ValueError):
            return 0
        if ready.status_code != 200 or not isinstance(body, dict):
            return 0
        live, limit = body.get("live_sessions"), body.get("max_sessions")
        if isinstance(live, int) and isinstance(limit, int):
            return max(limit - live, 0)
        return 1  # ready, capacity not reported
