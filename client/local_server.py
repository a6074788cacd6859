"""Deprecated name of ``analyst_env.server.local_server``: ``analyst_env.moved_modules``."""

import analyst_env.server.local_server as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
