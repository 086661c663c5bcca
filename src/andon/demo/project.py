"""The demo's example project: a small loader for bank-statement CSV exports.

The files are written from the dicts below; ``PACKETS`` holds the packet files and their
planted tests. Nothing here is imported by the example project itself.
"""

LOADER = '''\
"""Load bank-statement CSV exports (semicolon-separated, European number format)."""

import csv
import io


def parse_number(cell: str) -> float:
    """A numeric cell as a number."""
    return float(cell.strip())


def parse_total(cell: str):
    """The running-total column."""
    if not cell.strip():
        return 0
    return parse_number(cell)


def parse_date(cell: str) -> str:
    """A date cell, as written."""
    return cell.strip()


def parse_description(cell: str) -> str:
    """The free-text description."""
    return cell


def load_rows(text: str) -> list[dict]:
    """Every row of an export as a dict with date, description, amount and total."""
    reader = csv.DictReader(io.StringIO(text), delimiter=";")
    return [
        {
            "date": parse_date(row["date"]),
            "description": parse_description(row["description"]),
            "amount": parse_number(row["amount"]),
            "total": parse_total(row["total"]),
        }
        for row in reader
    ]
'''

EXISTING_TESTS = '''\
from ledger.loader import load_rows, parse_number


def test_plain_integer():
    assert parse_number("42") == 42


def test_load_rows_reads_every_row():
    rows = load_rows("date;description;amount;total\\n2025-01-02;rent;-900;100\\n"
                     "2025-01-03;salary;2000;2100\\n")
    assert [r["description"] for r in rows] == ["rent", "salary"]
    assert rows[1]["total"] == 2100
'''

FILES = {
    "pyproject.toml": '[project]\nname = "ledger"\nversion = "0.1.0"\n\n'
                      '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["src"]\n',
    ".gitignore": "__pycache__/\n*.pyc\n.pytest_cache/\n",
    "README.md": "# ledger\n\nLoads bank-statement CSV exports.\n",
    "src/ledger/__init__.py": "",
    "src/ledger/loader.py": LOADER,
    "tests/test_loader.py": EXISTING_TESTS,
}


def packet(pid: str, slug: str, goal: str, body: str, invariant: str, extra: str = "",
           requires: str = "") -> str:
    return f'''+++
id = "{pid}"
slug = "{slug}"
goal = "{goal}"
{requires}allowed_paths = ["src/ledger/**"]
forbidden_paths = ["pyproject.toml", "tests/**"]
{extra}
[[invariants]]
id = "{pid}-1"
critical = true
assert = "{invariant}"
+++

## Context

{body}

## Non-goals

Other columns and formats are out of scope.

## Stop conditions

Stop if the planted tests cannot pass without changing them.
'''


PACKETS = {
    "B01-thousands": (
        packet("B01", "thousands-separator", "A dot groups thousands: `16.429` loads as 16429.",
               "The bank writes amounts with a dot every three digits.",
               "parse_number('16.429') == 16429"),
        {"tests/test_thousands.py": '''\
from ledger.loader import parse_number


def test_dot_groups_thousands():
    assert parse_number("16.429") == 16429


def test_several_groups():
    assert parse_number("1.234.567") == 1234567


def test_negative_amount():
    assert parse_number("-3.000") == -3000
'''}),
    "B02-empty-total": (
        packet("B02", "empty-total-is-null", "An empty total cell loads as None (NULL), never 0.",
               "An empty total means the bank did not compute one; 0 would be a lie.",
               "parse_total('') is None", requires='requires = ["B01"]\n'),
        {"tests/test_empty_total.py": '''\
from ledger.loader import load_rows, parse_total


def test_empty_total_is_none():
    assert parse_total("") is None


def test_blank_total_is_none():
    assert parse_total("   ") is None


def test_row_with_empty_total():
    rows = load_rows("date;description;amount;total\\n2025-01-02;fee;-5;\\n")
    assert rows[0]["total"] is None
'''}),
    "B03-trailing-minus": (
        packet("B03", "trailing-minus", "A trailing minus is a sign: `120-` loads as -120.",
               "Some exports put the sign after the number.",
               "parse_number('120-') == -120", requires='requires = ["B01"]\n'),
        {"tests/test_trailing_minus.py": '''\
from ledger.loader import parse_number


def test_trailing_minus():
    assert parse_number("120-") == -120


def test_trailing_minus_with_thousands():
    assert parse_number("1.200-") == -1200
'''}),
    "B04-iso-dates": (
        packet("B04", "iso-dates", "A date `31.12.2025` loads as ISO `2025-12-31`.",
               "Dates are written day.month.year.",
               "parse_date('31.12.2025') == '2025-12-31'"),
        {"tests/test_dates.py": '''\
from ledger.loader import parse_date


def test_day_month_year():
    assert parse_date("31.12.2025") == "2025-12-31"


def test_single_digits():
    assert parse_date("1.2.2025") == "2025-02-01"
'''}),
    "B05-space-thousands": (
        packet("B05", "space-thousands",
               "A space groups thousands too: `1 234` loads as 1234, however many groups.",
               "Some exports group digits with spaces. The planted test shows one case; the "
               "invariant is the rule.",
               "parse_number('12 345 678') == 12345678", requires='requires = ["B03"]\n'),
        {"tests/test_space_thousands.py": """\
from ledger.loader import parse_number


def test_space_groups_thousands():
    assert parse_number("1 234") == 1234
"""}),
    "B06-dash-total": (
        packet("B06", "dash-total-is-null",
               "A total of `-` means no total: it loads as None, like an empty cell.",
               "The bank prints a dash where it did not compute a total. Loading must never "
               "invent a number; a person signs this one off.",
               "parse_total('-') is None", requires='requires = ["B02"]\n',
               extra='gate = "human"\n'),
        {"tests/test_dash_total.py": """\
from ledger.loader import parse_total


def test_dash_total_is_none():
    assert parse_total("-") is None


def test_padded_dash_total_is_none():
    assert parse_total(" - ") is None
"""}),
    "B07-parenthesised-negative": (
        packet("B07", "parenthesised-negative",
               "A total in parentheses is negative: `(1.250)` loads as -1250.",
               "Accountants write negative totals in parentheses.",
               "parse_total('(1.250)') == -1250", requires='requires = ["B02"]\n',
               extra="max_attempts = 3\n"),
        {"tests/test_parentheses.py": '''\
from ledger.loader import parse_total


def test_parenthesised_total_is_negative():
    assert parse_total("(1.250)") == -1250
'''}),
    "B08-trim-descriptions": (
        packet("B08", "trim-descriptions", "Descriptions lose surrounding whitespace.",
               "The bank pads descriptions with spaces.",
               "parse_description('  rent ') == 'rent'"),
        {"tests/test_descriptions.py": '''\
from ledger.loader import parse_description


def test_trimmed():
    assert parse_description("  rent ") == "rent"
'''}),
}
