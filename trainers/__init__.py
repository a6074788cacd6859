"""Trainer integrations over the typed client: TRL (``trl``), SkyRL (``skyrl``), Harbor task
directories (``harbor_export``), SFT records and notebooks from trajectories
(``trajectory_export``), OpenRLHF's agent file (``openrlhf_agent``), a HUD environment
(``hud``), veRL's agent loop and tools (``verl``, ``verl_tools``; they import veRL), and the
Hermes tool-call text form (``tool_calls``). What every
adapter shows a model is ``analyst_env.prompts``, a layer below, where the server reads it too.
"""
