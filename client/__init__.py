"""Clients for analyst_env: the typed OpenEnv client and the Gymnasium adapter."""

from analyst_env.openenv_compat import load_openenv

load_openenv()

# E402: the imports below must run after load_openenv() above.
from analyst_env.client.analyst_client import AnalystEnv  # noqa: E402

__all__ = ["AnalystEnv"]
