"""The images a local zygote can be built from.

On the local backend an "image" is the set of modules a zygote imports and warms
before it forks episode kernels; the interpreter and its packages are the
server's own. ``IMAGES`` holds the built-in ones (``"default"``); images baked
from recipes (``envs.recipes``) reach the backend through its ``image_resolver``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

MPL_BACKEND = "module://analyst_env.envs.kernel.mpl_backend"


def apply_mpl_rc() -> None:
    """Set the matplotlib settings every kernel starts with (zygote and remote runner).

    ``svg.fonttype = "none"``: text in a saved SVG stays ``<text>`` (matplotlib's default
    draws it as glyph paths), so a chart task's figure can be read back from its ticks and
    labels (``verifiers.chart_svg``); an analyst's SVG is smaller and editable this way too.
    A cell may change it; the chart task's request says so.
    """
    import matplotlib

    matplotlib.rcParams["svg.fonttype"] = "none"


_DEFAULT_WARM_UP = """
import io
import duckdb
import numpy as np
import pandas as pd
from IPython import get_ipython
from matplotlib import pyplot as plt

df = pd.DataFrame(np.arange(40.0).reshape(10, 4), columns=list("abcd"))
df.describe()
get_ipython().display_formatter.format(df)
con = duckdb.connect()
con.execute("SELECT sum(a) FROM df").fetchall()
con.close()
plt.plot([1, 2, 3])
plt.gcf().savefig(io.BytesIO(), format="png", bbox_inches="tight")
plt.close("all")
"""

_STANDBY_WARM_UP = """
import numpy as np
import pandas as pd

pd.DataFrame(np.arange(40.0).reshape(10, 4), columns=list("abcd")).sum()
"""


@dataclass(frozen=True)
class ImageSpec:
    """What a zygote for one image loads before serving forks.

    Attributes:
        name: The image name passed to ``SandboxBackend.start``.
        preload: Modules imported in the zygote, so kernels inherit them.
        warm_up: Code run once in the zygote (in a scratch namespace) to touch
            lazily initialised paths: formatters, duckdb, the PNG renderer. It
            must leave no threads and no open connections behind.
        standby_warm_up: Code each standby kernel runs before it is handed out,
            so the first real cell finds the cell path and the pandas pages
            already copied (a fork shares the zygote's pages until written).
            Kept cheap on purpose: every reset uses up one standby, and in a
            burst of resets the refill is bound by CPU. Measured in a fresh
            kernel here, a PNG render costs ~130 ms, ``describe()`` plus HTML
            formatting ~65 ms and a DuckDB connection ~30 ms (it starts
            threads), each far more than the page copying it would save the
            first real cell.
        site_dirs: Package directories of a baked image (``envs.recipes``), put
            in front of the server's own site-packages (their ``.pth`` files
            processed), so the image's packages win.
        path_dirs: Directories put in front of the kernels' ``PATH`` (npm bins).
        memory_mb, cpus, disk_mb: The image's own episode resources (a recipe's
            sizing); unset ones come from the backend's sizing.
    """

    name: str
    preload: tuple[str, ...]
    warm_up: str
    standby_warm_up: str = _STANDBY_WARM_UP
    site_dirs: tuple[str, ...] = ()
    path_dirs: tuple[str, ...] = ()
    memory_mb: int | None = None
    cpus: float | None = None
    disk_mb: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ImageSpec:
        data = json.loads(text)
        fields: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }
        return cls(**fields)


IMAGES: dict[str, ImageSpec] = {
    "default": ImageSpec(
        name="default",
        preload=("numpy", "pandas", "duckdb", "matplotlib.pyplot", "openpyxl", "sqlite3"),
        warm_up=_DEFAULT_WARM_UP,
    ),
}
