"""Trainer integrations over the typed client: TRL (``trl``), SkyRL (``skyrl``), ART
(``art``), Harbor task directories (``harbor_export``), SFT records and notebooks from
trajectories (``trajectory_export``), and what every adapter shows a model (``prompts``,
``tool_calls``).
"""
