"""Clients for analyst_env: the typed OpenEnv client and the Gymnasium adapter.

The client proper lives here (``analyst_client``, ``resume``, ``endpoints``,
``gym_env``, ``local_server``). Built on it: ``trainers`` (TRL, SkyRL, Harbor and
SFT exports, the prompts every adapter shows) and ``evaluation`` (``analyst-env
eval`` and ``validate``: policies, the episode loop, run logs and reports).
"""

from analyst_env.openenv_compat import load_openenv

load_openenv()

# E402: the imports below must run after load_openenv() above.
from analyst_env.client.analyst_client import AnalystEnv  # noqa: E402

__all__ = ["AnalystEnv"]
