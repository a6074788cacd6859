"""Clients for analyst_env: the typed OpenEnv client and the Gymnasium adapter.

The client talks to a server over the network (``analyst_client``, ``resume``,
``endpoints``) and adapts it to Gymnasium (``gym_env``). Importing it loads
openenv's wire types and WebSocket client, not openenv's server stack (FastAPI,
FastMCP, Gradio). Built on it, beside it: ``analyst_env.trainers`` and
``analyst_env.evaluation`` (their old names here still work, deprecated, as does
``local_server``, now ``analyst_env.server.local_server``).
"""

from analyst_env.openenv_compat import load_openenv_wire

load_openenv_wire()  # openenv's wire types and client, not its server stack

# E402: the imports below must run after load_openenv_wire() above.
from analyst_env.client.analyst_client import AnalystEnv  # noqa: E402

__all__ = ["AnalystEnv"]
