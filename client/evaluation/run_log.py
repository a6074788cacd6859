"""Deprecated name of ``analyst_env.run_records.run_log``: ``analyst_env.moved_modules``."""

import analyst_env.run_records.run_log as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
