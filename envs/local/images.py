"""The images a local zygote can be built from.

On the local backend an "image" is the set of modules a zygote imports and warms
before it forks episode kernels; the interpreter and its packages are the
server's own. Only ``"default"`` exists for now.
"""

from __future__ import annotations

from dataclasses import dataclass

MPL_BACKEND = "module://analyst_env.envs.local.mpl_backend"

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


@dataclass(frozen=True)
class ImageSpec:
    """What a zygote for one image loads before serving forks.

    Attributes:
        name: The image name passed to ``SandboxBackend.start``.
        preload: Modules imported in the zygote, so kernels inherit them.
        warm_up: Code run once in the zygote (in a scratch namespace) to touch
            lazily initialised paths: formatters, duckdb, the PNG renderer. It
            must leave no threads and no open connections behind.
    """

    name: str
    preload: tuple[str, ...]
    warm_up: str


IMAGES: dict[str, ImageSpec] = {
    "default": ImageSpec(
        name="default",
        preload=("numpy", "pandas", "duckdb", "matplotlib.pyplot", "openpyxl", "sqlite3"),
        warm_up=_DEFAULT_WARM_UP,
    ),
}
