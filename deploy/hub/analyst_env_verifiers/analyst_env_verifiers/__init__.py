"""analyst_env for verifiers 0.4, prime-rl and the Prime Intellect Environments Hub.

verifiers finds a taskset package by its ``__all__``: the ``Taskset`` subclass that makes
the tasks and the ``Env`` subclass that plays them (verifiers' own ``OpenEnvEnv``).
"""

from typing import Any

import verifiers.v1 as vf
from verifiers.v1.tasksets.openenv import OpenEnvEnv, OpenEnvEnvConfig

from analyst_env_verifiers.taskset import AnalystEnvConfig, AnalystEnvTaskset

ENV_ID = "analyst-env-verifiers"


def load_environment(**taskset_args: Any) -> vf.Env:
    """The environment for a Python caller: ``taskset_args`` are ``AnalystEnvConfig``'s
    fields (``base_url``, ``split``, ``num_tasks``, ...); built by verifiers' own loader,
    as ``vf-eval`` and prime-rl build it from their flags and TOML."""
    config = OpenEnvEnvConfig.model_validate({"taskset": {"id": ENV_ID, **taskset_args}})
    return vf.load_environment(config)


__all__ = ["AnalystEnvConfig", "AnalystEnvTaskset", "OpenEnvEnv", "load_environment"]
