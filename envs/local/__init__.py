"""The embedded local sandbox backend: episode kernels forked from a warm zygote.

Linux only. See ``backend`` for the design and ``bench`` for its latency.
"""

from analyst_env.envs.local.backend import LocalSandboxBackend
from analyst_env.envs.local.socket_link import LocalSandbox

__all__ = ["LocalSandbox", "LocalSandboxBackend"]
