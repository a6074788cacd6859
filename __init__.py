"""analyst_env: an OpenEnv-compatible RL environment server for data-analyst agents."""
