"""The texts the model reads when its code hits a limit or kills its kernel.

Every backend returns these exact strings (tests assert them), so a policy
trained on one backend reads the same words on another. Change them only on
purpose: they are part of what the model learns from.
"""

from __future__ import annotations

from analyst_env.envs.sandbox import CellResult, ExecutionError

KERNEL_DIED = (
    "The kernel process died (a crash, os._exit or the out-of-memory killer) and was "
    "restarted: variables are lost, files in the working directory are kept"
)
"""``value`` of the ``KernelDied`` error a cell gets when its kernel died under it."""

SHELL_KERNEL_LOST = f"[the kernel died or hung while running the command; {KERNEL_DIED}]\n"
"""``stderr`` of a shell command whose kernel died or hung (the command is reported timed out)."""


def kernel_died_result() -> CellResult:
    """The result of a cell whose kernel died; a fresh kernel has replaced it."""
    return CellResult(
        error=ExecutionError(name="KernelDied", value=KERNEL_DIED), kernel_restarted=True
    )


def timeout_error(timeout_s: float, restarted: bool, traceback: str = "") -> ExecutionError:
    """The ``TimeoutError`` of a cell stopped at its ``timeout_s`` limit.

    Args:
        timeout_s: The limit the cell hit, in seconds.
        restarted: The cell ignored the interrupt, so its kernel was replaced.
        traceback: Where the interrupt caught the cell, if it stopped.
    """
    value = f"The cell exceeded its {timeout_s:g} s time limit and was interrupted"
    if restarted:
        value += (
            "; it did not stop, so the kernel was restarted: variables are lost, "
            "files in the working directory are kept"
        )
    return ExecutionError(name="TimeoutError", value=value, traceback=traceback)


def timed_out_restarted_result(timeout_s: float) -> CellResult:
    """The result of a cell that ignored its interrupt; its kernel was replaced."""
    return CellResult(
        error=timeout_error(timeout_s, restarted=True), timed_out=True, kernel_restarted=True
    )
