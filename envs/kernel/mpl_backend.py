"""A non-interactive matplotlib backend that turns figures into cell outputs.

Selected in the zygote with ``matplotlib.use("module://analyst_env.envs.kernel.mpl_backend")``.
It renders with Agg, like the ``Agg`` backend, but ``plt.show()`` neither blocks
nor warns: it publishes every open figure as an ``image/png`` display output
(base64, as Jupyter does) and closes it. The kernel calls ``flush_figures`` after
each cell, so figures the cell left open are shown too, as in a notebook.
"""

from __future__ import annotations

import base64
import io

from IPython.display import publish_display_data
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def flush_figures() -> None:
    """Publish every open pyplot figure as an ``image/png`` output, then close them all."""
    from matplotlib import pyplot as plt

    for number in plt.get_fignums():
        buffer = io.BytesIO()
        plt.figure(number).savefig(buffer, format="png", bbox_inches="tight")
        publish_display_data({"image/png": base64.b64encode(buffer.getvalue()).decode("ascii")})
    plt.close("all")


def show(*args: object, **kwargs: object) -> None:
    """``plt.show()``: publish and close the open figures (arguments are ignored)."""
    flush_figures()
