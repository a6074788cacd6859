"""The analyst_env server: OpenEnv app, environment, tools."""

from analyst_env.openenv_compat import load_openenv

load_openenv()
