"""Deprecated name of ``analyst_env.trainers.trajectory_export``: ``analyst_env.moved_modules``."""

import analyst_env.trainers.trajectory_export as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
