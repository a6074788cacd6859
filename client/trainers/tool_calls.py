"""Deprecated name of ``analyst_env.trainers.tool_calls``: ``analyst_env.moved_modules``."""

import analyst_env.trainers.tool_calls as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
