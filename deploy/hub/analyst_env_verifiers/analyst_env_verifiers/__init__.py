"""analyst_env for verifiers 0.4, prime-rl and the Prime Intellect Environments Hub.

verifiers finds a taskset package by its ``__all__``: the ``Taskset`` subclass that makes
the tasks and the ``Env`` subclass that plays them (verifiers' own ``OpenEnvEnv``).
"""

from verifiers.v1.tasksets.openenv import OpenEnvEnv

from analyst_env_verifiers.taskset import AnalystEnvConfig, AnalystEnvTaskset

__all__ = ["AnalystEnvConfig", "AnalystEnvTaskset", "OpenEnvEnv"]
