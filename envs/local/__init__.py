"""The embedded local sandbox backend: episode kernels forked from a warm zygote.

Linux only. See ``backend`` for the design and ``bench`` for its latency.
"""

from .backend import LocalSandboxBackend
from .socket_link import LocalSandbox

__all__ = ["LocalSandbox", "LocalSandboxBackend"]
