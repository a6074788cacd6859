"""Deprecated name of ``analyst_env.evaluation.policies``: ``analyst_env.moved_modules``."""

import analyst_env.evaluation.policies as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
