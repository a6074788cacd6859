"""The /web debugging UI: browse tasks, play episodes, watch live sessions, replay recordings.

``mount_web(app, runtime, env_name)`` adds it to the server app; see ``routes.py``.
"""

from analyst_env.server.web.routes import mount_web

__all__ = ["mount_web"]
