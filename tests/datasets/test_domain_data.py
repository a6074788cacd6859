"""The domain data files: a row reads into the Domain it names, field by field, and a row
that is wrong in any way stops loading with an error naming the file and the domain.

A misspelt field must never fall back to a default: the domains decide every task's
tables, so a quiet mistake would change what each seed makes.
"""

import pytest

from analyst_env.datasets.procedural.domain_schema import (
    Domain,
    DomainDataError,
    Measure,
    domains_from_toml,
)
from analyst_env.datasets.procedural.domains import BY_NAME, GROUP_FILES, ORDER, load_domains

ROW = """
[[domain]]
name = "hr"
table = "payroll"
entity = "payment"
id_col = "payment_id"
date_col = "pay_date"
g1 = { column = "department", values = ["Engineering", "Sales", "Finance", "Support", "Legal", "Marketing"] }
g2 = { column = "grade", values = ["Junior", "Mid", "Senior", "Lead"] }
m1 = { name = "gross_pay", unit = "dollars", decimals = 2, dist = "normal", mean = 5200, sd = 1400 }
m2 = { name = "overtime_hours", unit = "hours", decimals = 0, dist = "poisson", lam = 7 }
dim_table = "employees"
key = "employee_id"
key_prefix = "E"
attr = { column = "location", values = ["Austin", "Boston", "Denver", "Seattle"] }
"""  # noqa: E501 - an inline TOML table is one line


def test_a_row_reads_into_the_domain_it_names():
    (hr,) = domains_from_toml(ROW, "people.toml")
    assert hr == Domain(
        "hr",
        "payroll",
        "payment",
        "payment_id",
        "pay_date",
        ("department", ("Engineering", "Sales", "Finance", "Support", "Legal", "Marketing")),
        ("grade", ("Junior", "Mid", "Senior", "Lead")),
        Measure("gross_pay", "dollars", ("normal", 5200, 1400), 2),
        Measure("overtime_hours", "hours", ("poisson", 7), 0),
        "employees",
        "employee_id",
        "E",
        ("location", ("Austin", "Boston", "Denver", "Seattle")),
    )
    assert hr == BY_NAME["hr"]


def test_the_shipped_files_give_every_domain_in_order():
    assert [d.name for d in load_domains()] == list(ORDER)


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        ('table = "payroll"', 'tabel = "payroll"', "unknown field 'tabel'; missing field 'table'"),
        ('key_prefix = "E"\n', "", "missing field 'key_prefix'"),
        ("mean = 5200, sd", "mu = 5200, sd", "unknown field 'mu'; missing field 'mean'"),
        ('dist = "poisson"', 'dist = "poison"', "dist must be one of"),
        ("decimals = 0", "decimals = 0.5", "decimals must be a whole number"),
        ("lam = 7", "lam = true", "m2, lam: expected a number"),
        ('"Mid", ', '"NA", ', "pandas reads ['NA'] as missing"),
        ('"Mid", ', '"Lead", ', "values repeat"),
        ('["Austin", "Boston", "Denver", "Seattle"]', '["Austin"]', "two or more"),
        ('entity = "payment"', 'entity = ""', "entity: expected a non-empty string"),
        ('id_col = "payment_id"', 'id_col = "pay_date"', "roles share a column name: pay_date"),
        ('g2 = { column = "grade",', 'g2 = { col = "grade",', "g2: unknown field 'col'"),
    ],
)
def test_a_wrong_row_names_its_file_domain_and_field(old, new, complaint):
    assert old in ROW
    with pytest.raises(DomainDataError) as caught:
        domains_from_toml(ROW.replace(old, new, 1), "people.toml")
    message = str(caught.value)
    assert message.startswith("people.toml, domain 'hr'")
    assert complaint in message


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (ROW.replace("[[domain]]", "[[domian]]"), "unknown field 'domian'"),
        (ROW.replace('name = "hr"', 'name = "hr'), "not valid TOML"),
        ("", "missing field 'domain'"),
    ],
)
def test_a_wrong_file_is_named(text, complaint):
    with pytest.raises(DomainDataError, match=f"^people.toml: .*{complaint}"):
        domains_from_toml(text, "people.toml")


def test_a_domain_in_two_files_or_none_stops_loading():
    with pytest.raises(DomainDataError, match=r"domain 'sales': also in domains_commerce.toml"):
        load_domains((*GROUP_FILES, "domains_commerce.toml"))
    with pytest.raises(DomainDataError, match=r"in ORDER but in no file: \['airline'"):
        load_domains(tuple(f for f in GROUP_FILES if f != "domains_leisure.toml"))
