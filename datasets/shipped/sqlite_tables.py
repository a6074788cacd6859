"""The starter set's tidy SQLite databases: a shop (retail) and a registrar (university).

Each ``make_*`` function returns one pandas frame per table, related by
foreign keys as a real database's are, with rows that have no partner
(customers who never ordered, products never sold). All randomness comes from
the ``numpy.random.Generator`` passed in; the category pools and draws they
share are in ``tables``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analyst_env.datasets.shipped.tables import (
    CATEGORIES,
    CITIES,
    mix_weights,
    person_names,
    random_dates,
)


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
            "signup_date": random_dates(rng, "2020-01-01", 4 * 365, n_cust),
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
            "order_date": random_dates(rng, "2022-01-01", 730, n_orders),
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
