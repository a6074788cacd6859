"""analyst_env: an OpenEnv-compatible RL environment server for data-analyst agents.

Importing the package registers the Gymnasium id ``analyst_env/DataAnalyst-v0``.
The server lives in ``analyst_env.server``, the client in ``analyst_env.client``, the
evaluation harness and the trainer adapters above it in ``analyst_env.evaluation`` and
``analyst_env.trainers``.
"""

import sys

__version__ = "0.1.0"

GYM_ID = "analyst_env/DataAnalyst-v0"


def _register(gymnasium) -> None:
    if GYM_ID not in gymnasium.registry:
        gymnasium.register(id=GYM_ID, entry_point="analyst_env.gymnasium_entry:make_gym_env")


class _RegisterWhenImported:
    """Registers the Gymnasium id right after ``gymnasium`` is first imported.

    Importing gymnasium (and numpy with it) costs about half a second, which every
    process importing any part of analyst_env would otherwise pay, the server and
    trainer workers that only need the client included. This meta-path finder lets
    the normal finders locate gymnasium and wraps its loader so that registration
    follows the import, whatever the order of ``import analyst_env`` and
    ``import gymnasium``.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "gymnasium":
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _RegisteringLoader(spec.loader)
        return spec


class _RegisteringLoader:
    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        _register(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


if "gymnasium" in sys.modules:
    _register(sys.modules["gymnasium"])
elif not any(isinstance(f, _RegisterWhenImported) for f in sys.meta_path):
    sys.meta_path.insert(0, _RegisterWhenImported())
