"""The analyst_env server: OpenEnv app, environment, tools.

Importing the package imports nothing heavy, so ``analyst-env serve`` can read its
settings and boot the sandbox backend before the server's own imports (openenv,
fastapi: about a second). The modules that import openenv call
``openenv_compat.load_openenv`` first.
"""
