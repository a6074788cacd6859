"""Synthetic but realistic tables for the starter set, drawn from a seeded generator.

Each ``make_*`` function returns plain pandas frames whose shape and quirks
resemble real analyst inputs: skewed category mixes, missing values, dates as
ISO strings, prices with cents, related tables with foreign keys. All
randomness comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

REGIONS = ["North", "South", "East", "West", "Central"]
CATEGORIES = {
    "Electronics": (80, 900),
    "Furniture": (50, 600),
    "Office Supplies": (2, 40),
    "Clothing": (10, 120),
    "Groceries": (1, 25),
}
FIRST = [
    "Ava",
    "Liam",
    "Noah",
    "Emma",
    "Mia",
    "Omar",
    "Yuki",
    "Ana",
    "Ivan",
    "Lena",
    "Ravi",
    "Chen",
    "Sara",
    "Tomas",
    "Zoe",
    "Amir",
    "Nina",
    "Kofi",
    "Eva",
    "Leo",
    "Maya",
    "Jonas",
    "Priya",
    "Diego",
    "Hana",
    "Felix",
    "Aisha",
    "Marco",
    "Ines",
    "Oscar",
]
LAST = [
    "Smith",
    "Garcia",
    "Kim",
    "Novak",
    "Okafor",
    "Silva",
    "Haddad",
    "Jensen",
    "Rossi",
    "Tanaka",
    "Müller",
    "Patel",
    "Dubois",
    "Cohen",
    "Ivanova",
    "Brown",
    "Lopez",
    "Berg",
]
CITIES = ["Austin", "Boston", "Chicago", "Denver", "Seattle", "Atlanta", "Phoenix", "Miami"]


def mix_weights(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random probabilities for ``n`` categories, uneven but none negligible (each 0.5x-1.5x of the
    mean)."""
    w = rng.uniform(0.5, 1.5, n)
    return w / w.sum()


def _dates(rng: np.random.Generator, start: str, days: int, n: int) -> pd.Series:
    d = pd.Timestamp(start) + pd.to_timedelta(rng.integers(0, days, n), unit="D")
    return pd.Series(d.strftime("%Y-%m-%d"))


def person_names(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct "First Last" names."""
    pairs = [f"{first} {last}" for first in FIRST for last in LAST]
    idx = rng.choice(len(pairs), size=n, replace=False)
    return [pairs[i] for i in idx]


def make_sales(rng: np.random.Generator, n: int = 2000) -> pd.DataFrame:
    """Retail order lines over 2022-2023."""
    cats = list(CATEGORIES)
    category = rng.choice(cats, n, p=mix_weights(rng, len(cats)))
    lo = np.array([CATEGORIES[c][0] for c in category])
    hi = np.array([CATEGORIES[c][1] for c in category])
    price = np.round(rng.uniform(lo, hi), 2)
    units = rng.integers(1, 12, n)
    discount = rng.choice([0.0, 0.05, 0.1, 0.2], n, p=[0.55, 0.2, 0.15, 0.1])
    df = pd.DataFrame(
        {
            "order_date": _dates(rng, "2022-01-01", 730, n),
            "region": rng.choice(REGIONS, n, p=mix_weights(rng, len(REGIONS))),
            "channel": rng.choice(["Online", "Store", "Phone"], n, p=[0.5, 0.4, 0.1]),
            "customer_id": rng.integers(1000, 1400, n),
            "category": category,
            "units": units,
            "unit_price": price,
            "discount": discount,
        }
    )
    df["revenue"] = np.round(df["units"] * df["unit_price"] * (1 - df["discount"]), 2)
    df = df.sort_values(["order_date", "customer_id"], kind="stable").reset_index(drop=True)
    df.insert(0, "order_id", np.arange(100001, 100001 + n))
    return df


def make_employees(rng: np.random.Generator, n: int = 400) -> pd.DataFrame:
    """An HR roster with salaries, levels and some missing review scores."""
    depts = {
        "Engineering": 98000,
        "Sales": 72000,
        "Marketing": 76000,
        "Finance": 85000,
        "HR": 64000,
        "Support": 55000,
        "Operations": 68000,
    }
    levels = {"Junior": 0.75, "Mid": 1.0, "Senior": 1.3, "Lead": 1.6}
    dept = rng.choice(list(depts), n, p=mix_weights(rng, len(depts)))
    level = rng.choice(list(levels), n, p=[0.3, 0.35, 0.25, 0.1])
    base = np.array([depts[d] * levels[lv] for d, lv in zip(dept, level)])
    salary = np.round(base * rng.lognormal(0, 0.12, n), -2)
    score = np.round(rng.normal(3.4, 0.7, n).clip(1, 5), 1)
    score[rng.random(n) < 0.08] = np.nan
    df = pd.DataFrame(
        {
            "emp_id": np.arange(1, n + 1),
            "name": person_names(rng, n),
            "department": dept,
            "job_level": level,
            "city": rng.choice(CITIES, n, p=mix_weights(rng, len(CITIES))),
            "hire_date": _dates(rng, "2010-01-01", 14 * 365, n),
            "age": (22 + rng.gamma(4, 4, n)).astype(int).clip(21, 66),
            "salary": salary,
            "performance_score": score,
            "remote": rng.choice(["Yes", "No"], n, p=[0.35, 0.65]),
        }
    )
    df["salary"] = df["salary"] + (df["age"] - 30) * 250
    return df


AIRPORTS = {"ATL": 0, "BOS": 1, "DEN": 2, "JFK": 3, "LAX": 4, "ORD": 5, "SEA": 6, "SFO": 7}
_COORDS = np.array(
    [
        [33.6, -84.4],
        [42.4, -71.0],
        [39.9, -104.7],
        [40.6, -73.8],
        [33.9, -118.4],
        [41.9, -87.9],
        [47.4, -122.3],
        [37.6, -122.4],
    ]
)


def make_flights(rng: np.random.Generator, n: int = 3000) -> pd.DataFrame:
    """Domestic flights in 2023 with delays and cancellations."""
    codes = list(AIRPORTS)
    origin = rng.choice(codes, n, p=mix_weights(rng, len(codes)))
    shift = rng.integers(1, len(codes), n)
    dest = np.array([codes[(AIRPORTS[o] + s) % len(codes)] for o, s in zip(origin, shift)])
    a, b = _COORDS[[AIRPORTS[o] for o in origin]], _COORDS[[AIRPORTS[d] for d in dest]]
    distance = (np.hypot(a[:, 0] - b[:, 0], (a[:, 1] - b[:, 1]) * 0.8) * 69).round().astype(int)
    carriers = ["AA", "DL", "UA", "WN", "B6", "AS"]
    carrier = rng.choice(carriers, n, p=mix_weights(rng, len(carriers)))
    carrier_bias = {c: rng.uniform(-2, 10) for c in carriers}
    hour = rng.integers(5, 23, n)
    dep = (
        rng.gamma(1.2, 14, n) - 8 + np.array([carrier_bias[c] for c in carrier]) + (hour - 12) * 0.8
    )
    arr = dep + rng.normal(-3, 9, n)
    cancelled = (rng.random(n) < 0.03).astype(int)
    df = pd.DataFrame(
        {
            "flight_date": _dates(rng, "2023-01-01", 365, n),
            "carrier": carrier,
            "origin": origin,
            "dest": dest,
            "sched_dep_hour": hour,
            "distance_mi": distance,
            "dep_delay_min": np.where(cancelled == 1, np.nan, dep.round()),
            "arr_delay_min": np.where(cancelled == 1, np.nan, arr.round()),
            "cancelled": cancelled,
        }
    )
    df = df.sort_values(["flight_date", "sched_dep_hour"], kind="stable").reset_index(drop=True)
    df.insert(0, "flight_id", [f"F{i:05d}" for i in range(1, n + 1)])
    return df


def make_sensors(rng: np.random.Generator, days: int = 21) -> pd.DataFrame:
    """Hourly environmental readings from four sites, with dropouts."""
    sites = {"Harbor": 14.0, "Airport": 16.5, "Downtown": 18.0, "Hills": 11.5}
    times = pd.date_range("2024-03-01", periods=days * 24, freq="h")
    frames = []
    for site, base in sites.items():
        hours = np.arange(len(times))
        temp = (
            base
            + 5 * np.sin((hours % 24 - 9) / 24 * 2 * np.pi)
            + hours / 100
            + rng.normal(0, 1.2, len(times))
        )
        hum = (75 - 1.8 * (temp - base) + rng.normal(0, 6, len(times))).clip(5, 100)
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": times.strftime("%Y-%m-%d %H:%M"),
                    "site": site,
                    "temperature_c": temp.round(2),
                    "humidity_pct": hum.round(1),
                    "pressure_hpa": (1013 + rng.normal(0, 4, len(times))).round(1),
                }
            )
        )
    df = pd.concat(frames, ignore_index=True)
    gaps = rng.random(len(df)) < 0.02
    df.loc[gaps, "temperature_c"] = np.nan
    df = df.sort_values(["timestamp", "site"], kind="stable").reset_index(drop=True)
    return df


def make_retail_db(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """A small shop database: customers, products, orders, order_items."""
    n_cust, n_prod, n_orders = 300, 60, 1500
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1, n_cust + 1),
            "name": person_names(rng, n_cust),
            "city": rng.choice(CITIES, n_cust, p=mix_weights(rng, len(CITIES))),
            "segment": rng.choice(
                ["Consumer", "Corporate", "Small Business"], n_cust, p=[0.55, 0.25, 0.2]
            ),
            "signup_date": _dates(rng, "2020-01-01", 4 * 365, n_cust),
        }
    )
    cats = list(CATEGORIES)
    pcat = rng.choice(cats, n_prod)
    products = pd.DataFrame(
        {
            "product_id": np.arange(1, n_prod + 1),
            "product_name": [f"{c.split()[0]} item {i:03d}" for i, c in enumerate(pcat, 1)],
            "category": pcat,
            "unit_price": np.round([rng.uniform(*CATEGORIES[c]) for c in pcat], 2),
        }
    )
    active = rng.choice(customers["customer_id"], int(n_cust * 0.9), replace=False)
    orders = pd.DataFrame(
        {
            "order_id": np.arange(5001, 5001 + n_orders),
            "customer_id": rng.choice(active, n_orders),
            "order_date": _dates(rng, "2022-01-01", 730, n_orders),
            "status": rng.choice(
                ["completed", "cancelled", "returned"], n_orders, p=[0.84, 0.09, 0.07]
            ),
        }
    ).sort_values("order_id")
    sold = rng.choice(products["product_id"], int(n_prod * 0.92), replace=False)
    lines = rng.integers(1, 5, n_orders)
    items = pd.DataFrame(
        {
            "order_id": np.repeat(orders["order_id"].to_numpy(), lines),
            "product_id": rng.choice(sold, lines.sum()),
            "quantity": rng.integers(1, 6, lines.sum()),
            "discount": rng.choice([0.0, 0.1, 0.15], lines.sum(), p=[0.7, 0.2, 0.1]),
        }
    )
    items.insert(0, "item_id", np.arange(1, len(items) + 1))
    return {"customers": customers, "products": products, "orders": orders, "order_items": items}


def make_university_db(rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    """A registrar database: departments, courses, students, enrollments with grades."""
    depts = ["Mathematics", "Physics", "History", "Biology", "Economics", "Computer Science"]
    departments = pd.DataFrame(
        {
            "dept_id": np.arange(1, len(depts) + 1),
            "dept_name": depts,
            "building": rng.choice(
                ["Hall A", "Hall B", "Science Center", "Library Wing"], len(depts)
            ),
        }
    )
    topics = ["Intro to", "Advanced", "Topics in", "Seminar in"]
    rows = []
    for dept_id, d in enumerate(depts, 1):
        for t in topics[: int(rng.integers(3, 5))]:
            rows.append(
                {"dept_id": dept_id, "title": f"{t} {d}", "credits": int(rng.choice([2, 3, 4]))}
            )
    courses = pd.DataFrame(rows)
    courses.insert(0, "course_id", np.arange(101, 101 + len(courses)))
    courses = courses[["course_id", "title", "dept_id", "credits"]]
    n_stu = 250
    students = pd.DataFrame(
        {
            "student_id": np.arange(1, n_stu + 1),
            "name": person_names(rng, n_stu),
            "major_dept_id": rng.choice(
                departments["dept_id"], n_stu, p=mix_weights(rng, len(depts))
            ),
            "enrollment_year": rng.integers(2019, 2024, n_stu),
        }
    )
    difficulty = {cid: rng.normal(0, 6) for cid in courses["course_id"]}
    ability = rng.normal(72, 9, n_stu)
    recs = []
    for sid in students["student_id"]:
        for term in ["2023-Fall", "2024-Spring"]:
            for cid in rng.choice(courses["course_id"], int(rng.integers(2, 5)), replace=False):
                g = ability[sid - 1] + difficulty[cid] + rng.normal(0, 8)
                recs.append(
                    {
                        "student_id": int(sid),
                        "course_id": int(cid),
                        "term": term,
                        "grade": float(np.clip(round(g, 1), 0, 100)),
                    }
                )
    enrollments = pd.DataFrame(recs)
    return {
        "departments": departments,
        "courses": courses,
        "students": students,
        "enrollments": enrollments,
    }


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
