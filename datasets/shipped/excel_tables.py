"""The starter set's tidy Excel workbooks: quarterly financials and a warehouse inventory.

Each ``make_*`` function returns one pandas frame per sheet; the questions
about them need more than one sheet (all four quarters against the targets,
stock joined to products and warehouses). All randomness comes from the
``numpy.random.Generator`` passed in; the category pools and draws they share
are in ``tables``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.tables import (
    CATEGORIES,
    REGIONS,
)


def make_financials_wb(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """Quarterly sheets Q1..Q4 (region x product line) plus annual targets."""
    lines = ["Hardware", "Software", "Services", "Support Plans"]
    price = {"Hardware": 420.0, "Software": 180.0, "Services": 950.0, "Support Plans": 240.0}
    margin = {"Hardware": 0.28, "Software": 0.72, "Services": 0.35, "Support Plans": 0.55}
    scale = {r: rng.uniform(0.6, 1.5) for r in REGIONS}
    sheets = {}
    annual = {r: 0.0 for r in REGIONS}
    for q in range(1, 5):
        rows = []
        for r in REGIONS:
            for line in lines:
                units = int(rng.integers(80, 400) * scale[r] * (1 + 0.05 * q))
                revenue = round(units * price[line] * rng.uniform(0.9, 1.1), 2)
                cost = round(revenue * (1 - margin[line]) * rng.uniform(0.9, 1.1), 2)
                annual[r] += revenue
                rows.append(
                    {
                        "region": r,
                        "product_line": line,
                        "units": units,
                        "revenue": revenue,
                        "cost": cost,
                    }
                )
        sheets[f"Q{q}"] = pd.DataFrame(rows)
    sheets["Targets"] = pd.DataFrame(
        {
            "region": REGIONS,
            "annual_revenue_target": [
                round(annual[r] * rng.uniform(0.85, 1.15), -3) for r in REGIONS
            ],
        }
    )
    return sheets


def make_inventory_wb(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """Products, per-warehouse stock and warehouse capacities on three sheets."""
    n = 80
    cats = list(CATEGORIES)
    cat = rng.choice(cats, n)
    products = pd.DataFrame(
        {
            "sku": [f"SKU-{i:04d}" for i in range(1, n + 1)],
            "product_name": [f"{c.split()[0]} {i:03d}" for i, c in enumerate(cat, 1)],
            "category": cat,
            "unit_cost": np.round([rng.uniform(*CATEGORIES[c]) * 0.6 for c in cat], 2),
            "supplier": rng.choice(
                ["Acme Corp", "Globex", "Initech", "Umbrella", "Stark Supply"], n
            ),
        }
    )
    warehouses = pd.DataFrame(
        {
            "warehouse": ["WH-North", "WH-South", "WH-East", "WH-West", "WH-Central"],
            "city": ["Chicago", "Atlanta", "Boston", "Seattle", "Denver"],
            "capacity_units": [9000, 7000, 6000, 8000, 5000],
        }
    )
    rows = []
    for sku in products["sku"]:
        for wh in rng.choice(warehouses["warehouse"], int(rng.integers(0, 4)), replace=False):
            rows.append({"sku": sku, "warehouse": wh, "quantity": int(rng.integers(0, 300))})
    stock = pd.DataFrame(rows)
    return {"Products": products, "Stock": stock, "Warehouses": warehouses}
