"""A warm pool of slot runners and the backend logic shared by Docker and Modal.

A *slot* is one long-lived container or sandbox running the slot runner. A
slot serves one episode at a time and many episodes in turn: ``start`` takes
an idle slot (or makes one), sends it the task files, and the closed episode
hands the slot back. A background thread keeps ``pool.warm`` idle slots per
image ready, so a reset pays only the runner's fork (milliseconds) plus the
network, not a container or sandbox start (seconds). A slot whose runner failed,
or that served ``pool.max_episodes`` episodes, is destroyed instead of reused.
"""

from __future__ import annotations

import base64
import collections
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from analyst_env.envs.capabilities import BackendCapabilities
from analyst_env.envs.recipes.recipe import IMAGE_PREFIX, Recipe
from analyst_env.envs.remote import runner_image
from analyst_env.envs.remote.artifacts import BakesItself, write_manifest
from analyst_env.envs.remote.options import Sizing, Timeouts, WarmPool
from analyst_env.envs.remote.runner_link import RemoteSandbox, RunnerClient
from analyst_env.envs.sandbox import SandboxBackend, SandboxError
from analyst_env.envs.task_files import check_task_file_name

log = logging.getLogger(__name__)
_START_TIMEOUT_S = 120.0


@dataclass(eq=False)
class Slot:
    """One runner: its client and how to destroy what hosts it."""

    client: RunnerClient
    destroy: Callable[[], None]
    episodes: int = 0
    meta: dict = field(default_factory=dict)

    def dispose(self) -> None:
        self.client.close()
        try:
            self.destroy()
        except Exception as exc:
            log.warning("destroying slot %s failed: %s", self.client.label, exc)


def before_half_life(slot: Slot, lifetime_s: float) -> bool:
    """Whether ``slot`` is younger than half ``lifetime_s``, counted from its sandbox's
    creation (``meta["created"]``, a ``time.monotonic()`` reading).

    Where the vendor ends a sandbox once its lifetime is over (a timeout, a shutdown time,
    an auto-stop), a slot retired at half of it never has its sandbox ended under an
    episode, and the warm pool replaces it in the background instead.
    """
    return time.monotonic() - slot.meta["created"] < lifetime_s * 0.5


BuildLog = Callable[[str], None]
"""Where an image build writes its progress lines: ``bake``'s log, or nowhere."""


def quiet_build(line: str) -> None:
    """The build log of a build that ``bake`` did not ask for (warm-up, first episode)."""


class RunnerBackend(BakesItself, SandboxBackend):
    """Base of the backends whose episodes run on slot runners.

    Subclasses implement ``_prepare_image`` (build or find the recipe's image,
    once per image name, writing build output to the ``log`` it is given) and
    ``_create_slot`` (start one container or sandbox with its runner and return a
    ready ``Slot``). A subclass reads its ``sizing`` and ``timeouts``
    (``options.py``): the class attributes are the defaults, which a subclass whose
    defaults differ overrides, and its constructor keeps the ones it is given instead.

    Args:
        resolve: Maps an image name to its recipe.
        pool: The warm slots (``None``: ``WarmPool()``).
        interrupt_grace_s: How long an interrupted cell may take to stop.
    """

    name = "remote"
    # One container or sandbox per slot, with no network and its own limits; warm slots.
    capabilities = BackendCapabilities(network="none", warm_pool=True, verify_commands=True)
    sizing = Sizing()
    timeouts = Timeouts()

    def __init__(
        self,
        resolve: Callable[[str], Recipe],
        *,
        pool: WarmPool | None = None,
        interrupt_grace_s: float = 2.0,
    ) -> None:
        self._resolve = resolve
        self.pool = pool or WarmPool()
        self.interrupt_grace_s = interrupt_grace_s
        self._idle: dict[str, collections.deque[Slot]] = {}
        self._recipes: dict[str, Recipe] = {}
        self._image_locks: dict[str, threading.Lock] = collections.defaultdict(threading.Lock)
        self._busy: set[Slot] = set()
        self._lock = threading.Condition()
        self._closed = False
        self._filler = threading.Thread(
            target=self._fill, name=f"{self.name}-warm-pool", daemon=True
        )
        self._filler.start()

    # ── subclass hooks ─────────────────────────────────────────────────────
    def _prepare_image(self, image: str, recipe: Recipe, log: BuildLog) -> None:
        raise NotImplementedError

    def _create_slot(self, image: str, recipe: Recipe) -> Slot:
        raise NotImplementedError

    def bake(
        self,
        recipe: Recipe,
        out_dir: Path,
        *,
        log: Callable[[str], None],
        progress: Callable[[float], None],
    ) -> None:
        """Build ``recipe``'s image for this backend (the sandbox environments' build step).

        Finds the artifact by its hash or builds it, then records it in ``out_dir``
        so episodes bound to ``env-<hash>`` resolve to this recipe.
        """
        image = IMAGE_PREFIX + recipe.content_hash()
        log(f"{self.name}: preparing image for {image}")
        progress(0.05)
        with self._image_locks[image]:
            self._prepare_image(image, recipe, log)
            self._recipes[image] = recipe
        write_manifest(out_dir, recipe, backend=self.name, artifact=self.artifact_name(recipe))
        log(f"{self.name}: {self.artifact_name(recipe)} is ready")

    def artifact_name(self, recipe: Recipe) -> str:
        """What ``bake`` records as ``recipe``'s artifact: the runner image's reference
        (``analyst-env:<artifact tag>``) where an image engine or registry holds it (Docker,
        Modal); a vendor that names its images otherwise (snapshots, blueprints) overrides it."""
        return runner_image.image_reference(recipe)

    def _slot_usable(self, slot: Slot) -> bool:
        """Whether an idle slot may serve another episode (e.g. not about to expire)."""
        return True

    # ── SandboxBackend, and WarmsUp (envs/capabilities.py) ─────────────────
    # No protections report (ReportsProtections): the container runtime or the vendor owns
    # isolation.
    def warm_up(self, image: str = "default") -> None:
        """Build or find ``image`` now and start keeping warm slots for it."""
        self._recipe(image)
        with self._lock:
            self._idle.setdefault(image, collections.deque())
            self._lock.notify_all()

    def start(
        self,
        image: str,
        *,
        files: dict[str, str],
        seed: int | None = None,
        env: dict[str, str] | None = None,
    ) -> RemoteSandbox:
        """Start a fresh sandbox; see ``SandboxBackend.start``.

        Raises:
            SandboxError: Unknown image, unreadable task file, or no slot could be started.
        """
        if self._closed:
            raise SandboxError("the backend is closed")
        recipe = self._recipe(image)
        encoded = {
            name: base64.b64encode(data).decode("ascii")
            for name, data in read_task_files(files).items()
        }
        payload = {"op": "start", "files": encoded, "seed": seed, "env": dict(env or {})}
        last_error: Exception | None = None
        for _ in range(2):  # an idle slot may have died while it waited
            slot = self._take(image, recipe)
            try:
                reply = slot.client.call(payload, _START_TIMEOUT_S)
            except SandboxError as exc:
                last_error = exc
                slot.dispose()
                continue
            if reply is None or "failure" in reply:
                slot.dispose()
                detail = "no answer in time" if reply is None else reply["failure"]["message"]
                raise SandboxError(f"could not start the episode in {slot.client.label}: {detail}")
            slot.episodes += 1
            with self._lock:
                self._busy.add(slot)
            return RemoteSandbox(
                slot.client,
                reply["workdir"],
                on_close=functools.partial(self._give_back, image, slot),
                interrupt_grace_s=self.interrupt_grace_s,
            )
        raise SandboxError(f"could not start a sandbox on the {self.name} backend: {last_error}")

    def close(self) -> None:
        """Destroy every slot, idle or busy. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            slots = [s for idle in self._idle.values() for s in idle] + list(self._busy)
            self._idle.clear()
            self._busy.clear()
            self._lock.notify_all()
        for slot in slots:
            slot.dispose()

    # ── pool ───────────────────────────────────────────────────────────────
    def _recipe(self, image: str) -> Recipe:
        recipe = self._resolve(image)
        with self._image_locks[image]:
            known = self._recipes.get(image)
            if known is None or known.content_hash() != recipe.content_hash():
                self._prepare_image(image, recipe, quiet_build)
                self._recipes[image] = recipe
                with self._lock:
                    stale = self._idle.pop(image, collections.deque())
                for slot in stale:
                    slot.dispose()
        return recipe

    def _take(self, image: str, recipe: Recipe) -> Slot:
        while True:
            with self._lock:
                idle = self._idle.setdefault(image, collections.deque())
                slot = idle.popleft() if idle else None
                self._lock.notify_all()
            if slot is None:
                return self._create_slot(image, recipe)
            if self._slot_usable(slot):
                return slot
            slot.dispose()

    def _give_back(self, image: str, slot: Slot, healthy: bool) -> None:
        with self._lock:
            self._busy.discard(slot)
            idle = self._idle.get(image)
            keep = (
                healthy
                and not self._closed
                and idle is not None
                and len(idle) < self.pool.warm
                and slot.episodes < self.pool.max_episodes
                and self._slot_usable(slot)
            )
            if keep and idle is not None:  # keep implies idle is not None
                idle.append(slot)
                self._lock.notify_all()
        if not keep:
            threading.Thread(target=slot.dispose, name=f"{self.name}-dispose", daemon=True).start()

    def _wanted(self) -> str | None:
        for image, idle in self._idle.items():
            if len(idle) < self.pool.warm:
                return image
        return None

    def _fill(self) -> None:
        """Background thread: keep ``pool.warm`` idle slots per image used so far."""
        while True:
            with self._lock:
                while not self._closed and self._wanted() is None:
                    self._lock.wait()
                if self._closed:
                    return
                image = self._wanted()
                assert image is not None  # under the same lock as the wait that saw one
                recipe = self._recipes.get(image)
            if recipe is None:
                with self._lock:
                    self._lock.wait(timeout=0.5)
                continue
            try:
                slot = self._create_slot(image, recipe)
            except Exception as exc:
                log.warning("could not prepare a warm %s slot for %r: %s", self.name, image, exc)
                with self._lock:
                    self._lock.wait(timeout=5.0)  # do not spin on a failing service
                continue
            with self._lock:
                idle = self._idle.get(image)
                if self._closed or idle is None or len(idle) >= self.pool.warm:
                    extra = slot
                else:
                    idle.append(slot)
                    extra = None
            if extra is not None:
                extra.dispose()


def read_task_files(files: dict[str, str]) -> dict[str, bytes]:
    """``{name: bytes}`` of the task files, read here to be sent to a remote sandbox.

    Raises:
        SandboxError: A name escapes the working directory or a file cannot be read.
    """
    out = {}
    for name, source in files.items():
        try:
            check_task_file_name(name)
        except ValueError as exc:
            raise SandboxError(str(exc)) from None
        try:
            with open(source, "rb") as f:
                out[name] = f.read()
        except OSError as exc:
            raise SandboxError(f"could not open task file {source!r}: {exc.strerror}") from exc
    return out
