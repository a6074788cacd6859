"""Clients for analyst_env: the typed OpenEnv client and the Gymnasium adapter."""

from analyst_env.openenv_compat import load_openenv

load_openenv()

from analyst_env.client.analyst_client import AnalystEnv

__all__ = ["AnalystEnv"]
