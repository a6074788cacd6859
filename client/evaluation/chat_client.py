"""Deprecated name of ``analyst_env.evaluation.chat_client``: ``analyst_env.moved_modules``."""

import analyst_env.evaluation.chat_client as moved
from analyst_env.moved_modules import alias_moved_module

alias_moved_module(__name__, moved)
