"""Which image an episode runs in: the task's ``image`` or the reset option ``environment``.

Kept apart from ``environment.py`` so the binding rules live next to nothing else. With
sandbox environments mounted (``runtime.environments``) a name is looked up there: a
built environment gives its baked image, one still building refuses the reset
(``Sandbox environment image is not ready (build status: building)``), a deleted one
falls back to the default image with a warning in the reset metadata. Without them the
task's image goes to the backend unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EpisodeImage:
    image: str
    environment: str | None = None
    warning: str | None = None

    def metadata(self) -> dict:
        """Keys added to the reset observation's metadata."""
        out: dict = {}
        if self.environment is not None:
            out["environment"] = self.environment
        if self.warning is not None:
            out["warning"] = self.warning
        return out


def resolve_image(runtime, task, environment: str | None) -> EpisodeImage:
    """The episode's image.

    Raises:
        EnvironmentNotReady: The bound environment's image is not ready.
        UnknownEnvironment: The reset option names no environment.
        ValueError: The reset option is given but the server has no environments.
    """
    service = runtime.environments
    if service is None:
        if environment is not None:
            raise ValueError(
                "this server has no sandbox environments; drop the 'environment' option"
            )
        return EpisodeImage(task.image)
    resolved = service.resolve(environment or task.image, explicit=environment is not None)
    return EpisodeImage(resolved.image, resolved.environment, resolved.warning)
