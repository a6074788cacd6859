"""Time-bound a blocking vendor call, and import vendor SDKs with a clear error.

Vendor clients retry on their own: Modal's keeps reconnecting for about 58 s
when the network is down. A server must fail at start-up within seconds
instead, saying what is wrong, so each call that may block on the network
runs in a daemon thread that is abandoned at the deadline.
"""

from __future__ import annotations

import importlib
import importlib.util
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TypeVar

from analyst_env.envs.sandbox import SandboxError

T = TypeVar("T")


class BackendUnavailable(SandboxError):
    """A remote backend cannot be used: SDK missing, credentials missing, or service unreachable."""


def call_within(timeout_s: float, what: str, fn: Callable[[], T]) -> T:
    """Run ``fn`` and return its result, or raise ``BackendUnavailable`` after ``timeout_s``.

    Exceptions raised by ``fn`` propagate unchanged. A call that overruns keeps
    running in its daemon thread; its result is dropped.
    """
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, name=f"bounded-{what}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise BackendUnavailable(
            f"{what} did not answer within {timeout_s:g} s (is the service reachable?)"
        )
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def require_api_key(api_key: str | None, backend: str, key: str, endpoint: str, vendor: str) -> str:
    """``api_key``, or the one-line refusal that names the variables to set.

    Args:
        api_key: What the settings gave (None or empty when the variable is unset).
        backend: The backend's name ("runloop").
        key: The variable that holds the key ("RUNLOOP_API_KEY").
        endpoint: The variable for another endpoint ("RUNLOOP_BASE_URL").
        vendor: The service's name, as the message says it ("Runloop").

    Raises:
        BackendUnavailable: No key.
    """
    if not api_key:
        raise BackendUnavailable(
            f"the {backend} backend needs credentials: set {key} "
            f"(and {endpoint} for an endpoint other than {vendor}'s cloud)"
        )
    return api_key


def first_call(
    timeout_s: float,
    vendor: str,
    where: str,
    fn: Callable[[], T],
    refused: type[BaseException] | tuple[type[BaseException], ...],
) -> T:
    """A backend's first authenticated call at start-up, so that bad credentials or a wrong
    endpoint stop the server then, in one line, and not at the first episode.

    Args:
        timeout_s: How long the service may take to answer (``Timeouts.connect_s``).
        vendor: The service's name, as the error says it ("Runloop").
        where: Its endpoint, or "<vendor>'s cloud".
        fn: One cheap call that needs valid credentials.
        refused: The SDK's error types for a refused request.

    Raises:
        BackendUnavailable: No answer within ``timeout_s``, or the request was refused.
    """
    try:
        return call_within(timeout_s, f"{vendor} (API at {where})", fn)
    except refused as exc:
        raise BackendUnavailable(f"{vendor} at {where} refused the request: {exc}") from None


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import a vendor SDK, or explain which extra installs it.

    Raises:
        BackendUnavailable: The SDK is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _not_installed(module, extra, str(exc)) from None


def require_sdk(module: str, extra: str) -> None:
    """Check that a vendor SDK is installed without importing it here (the coreweave
    backend's SDK runs in a process of its own).

    Raises:
        BackendUnavailable: The SDK is not installed.
    """
    if importlib.util.find_spec(module) is None:
        raise _not_installed(module, extra, f"no module named {module!r}")


def _not_installed(module: str, extra: str, why: str) -> BackendUnavailable:
    return BackendUnavailable(
        f"the {extra} backend needs the {module!r} package: pip install 'analyst-env[{extra}]' "
        f"({why})"
    )
