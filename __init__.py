"""analyst_env: an OpenEnv-compatible RL environment server for data-analyst agents.

Importing the package registers the Gymnasium id ``analyst_env/DataAnalyst-v0``.
The server lives in ``analyst_env.server``, the clients in ``analyst_env.client``.
"""

__version__ = "0.1.0"


def _register_gymnasium() -> None:
    try:
        import gymnasium
    except ImportError:  # gymnasium is a dependency, but the wire types must not need it
        return
    if "analyst_env/DataAnalyst-v0" not in gymnasium.registry:
        gymnasium.register(
            id="analyst_env/DataAnalyst-v0",
            entry_point="analyst_env.client.gym_env:AnalystGymEnv",
        )


_register_gymnasium()
