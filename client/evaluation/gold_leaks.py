"""Deprecated name of ``analyst_env.evaluation.gold_leaks``: ``analyst_env.moved_modules``."""

import analyst_env.evaluation.gold_leaks as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
