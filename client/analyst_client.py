"""``AnalystEnv``: the typed OpenEnv client for analyst_env.

A plain OpenEnv ``EnvClient`` over ``/ws``: async by default, synchronous
outside an event loop or through ``.sync()``, with one method per tool.

Example (against ``analyst-env serve``)::

    from analyst_env.client import AnalystEnv

    with AnalystEnv(base_url="http://127.0.0.1:8000").sync() as env:
        first = env.reset(task_id="starter-sales-000")
        print(first.observation.instruction)
        print(env.add_and_execute_code_cell("import pandas as pd; pd.read_csv('sales.csv').shape").observation.text)
        result = env.final_answer("42")
        print(result.reward, result.done)
"""

from __future__ import annotations

from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.mcp_types import ListToolsAction, ListToolsObservation
from openenv.core.env_server.types import Action, Observation

from analyst_env.models import (
    AnalystResetObservation,
    AnalystState,
    AnalystToolObservation,
    CallToolAction,
)


class AnalystEnv(EnvClient[Action, Observation, AnalystState]):
    """Client for one episode session. ``reset``, ``step``, ``state`` plus a method per tool.

    Tool methods return a ``StepResult`` whose ``observation`` is an
    ``AnalystToolObservation``; ``observation.text`` is what the model would read.
    """

    def _step_payload(self, action: Action) -> dict[str, Any]:
        if isinstance(action, ListToolsAction):
            return {"type": "list_tools"}
        return action.model_dump(exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Observation]:
        obs = dict(payload.get("observation", {}))
        obs.update(done=payload.get("done", False), reward=payload.get("reward"))
        if "instruction" in obs:
            observation: Observation = AnalystResetObservation.model_validate(obs)
        elif "tools" in obs:
            observation = ListToolsObservation.model_validate(obs)
        else:
            observation = AnalystToolObservation.model_validate(obs)
        return StepResult(
            observation=observation,
            reward=payload.get("reward"),
            done=payload.get("done", False),
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> AnalystState:
        return AnalystState.model_validate(payload)

    # ── one call per tool ───────────────────────────────────────────────────
    def call_tool(self, name: str, **arguments: Any) -> Any:
        """Call tool ``name`` as one step."""
        return self.step(CallToolAction(tool_name=name, arguments=arguments))

    def list_tools(self) -> Any:
        """The tool catalogue, as one step."""
        return self.step(ListToolsAction())

    def add_and_execute_code_cell(self, code: str) -> Any:
        return self.call_tool("add_and_execute_code_cell", code=code)

    def edit_and_execute_current_cell(self, code: str) -> Any:
        return self.call_tool("edit_and_execute_current_cell", code=code)

    def execute_shell_command(self, command: str) -> Any:
        return self.call_tool("execute_shell_command", command=command)

    def run_sql(self, query: str) -> Any:
        return self.call_tool("run_sql", query=query)

    def list_files(self) -> Any:
        return self.call_tool("list_files")

    def get_notebook_state(self, include_images: bool = False) -> Any:
        return self.call_tool("get_notebook_state", include_images=include_images)

    def final_answer(self, answer: str) -> Any:
        return self.call_tool("final_answer", answer=answer)
