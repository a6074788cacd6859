"""veRL's trainer config for our agent loop and tools, with a small model: what a run needs.

veRL builds an ``AgentLoopWorker`` from its whole PPO trainer config. This starts from the
config veRL generates (``_generated_ppo_trainer.yaml``), puts the server's URL into the
agent-loop and tool YAMLs this package ships (``trainers/verl_configs``), and sets the
multi-turn rollout options our loop needs. The veRL integration test and the adapter
benchmark (``adapter_drivers``) both run veRL's worker on it. Imported only in the veRL
venv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import verl.trainer.config as verl_trainer_config
from omegaconf import OmegaConf

import analyst_env.trainers as trainers_pkg


def trainer_config(model_dir: str, work: Path, server: str, loop_url: str) -> Any:
    """veRL's generated PPO config with our YAMLs (the server's URL put in) and the tiny model."""
    cfg = OmegaConf.load(Path(verl_trainer_config.__file__).parent / "_generated_ppo_trainer.yaml")
    shipped = Path(trainers_pkg.__file__).parent / "verl_configs"
    loops: Any = OmegaConf.load(shipped / "agent_loop.yaml")  # a list of loop entries
    for entry in loops:
        entry.base_url = loop_url
    OmegaConf.save(loops, work / "agent_loop.yaml")
    tools: Any = OmegaConf.load(shipped / "tools.yaml")
    for entry in tools.tools:
        entry.config.base_url = server
    OmegaConf.save(tools, work / "tools.yaml")
    rollout = cfg.actor_rollout_ref.rollout
    cfg.actor_rollout_ref.model.path = model_dir
    rollout.name = "vllm"
    rollout.prompt_length = 4096
    rollout.response_length = 2048
    rollout.multi_turn.enable = True
    rollout.multi_turn.format = "hermes"
    rollout.multi_turn.max_tool_response_length = 2000
    rollout.multi_turn.tool_config_path = str(work / "tools.yaml")
    rollout.agent.agent_loop_config_path = str(work / "agent_loop.yaml")
    cfg.data.max_prompt_length = 4096
    cfg.reward.custom_reward_function.path = "pkg://analyst_env.trainers.verl_tools"
    cfg.reward.custom_reward_function.name = "compute_score"
    return cfg
