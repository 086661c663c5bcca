"""Reading a CSV of runs into the run table (andon.experiments.runs): the columns, what is
missing versus zero, errors and repeats, and every kind of bad input named with file, line,
column, expected and got."""

from __future__ import annotations

from pathlib import Path

import pytest

from andon.errors import UsageError
from andon.experiments.runs import RunsError, read_csv


def write(tmp_path: Path, text: str, name: str = "runs.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_reads_every_column_and_keeps_missing_apart_from_zero(tmp_path):
    p = write(tmp_path, (
        "task,condition,resolved,repeat,cost_usd,input_tokens,output_tokens,"
        "cache_read_tokens,cache_write_tokens,wall_s,tool_s,model\n"
        "t1,A,true,0,0.25,1000,200,500,0,12.5,3,opus\n"
        "t1,B,0,0,,NA,nan,,,0,,x\n"))
    table = read_csv(p)
    assert table.conditions() == ["A", "B"]
    a, b = table.runs
    assert (a.task, a.condition, a.repeat, a.outcome) == ("t1", "A", 0, "resolved")
    assert a.metrics["cost_usd"] == 0.25 and a.metrics["tool_s"] == 3.0
    assert b.outcome == "unresolved"
    assert b.metrics["cost_usd"] is None and b.metrics["input_tokens"] is None
    assert b.metrics["wall_s"] == 0.0          # a zero stays a zero
    assert table.ignored_columns == ("model",)
    assert a.origin == f"{p}:2"


def test_minimal_columns_a_bom_and_blank_lines(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_bytes("\ufefftask,condition,resolved\r\nt1,A,yes\r\n\r\nt1,B,No\r\n".encode())
    table = read_csv(p)
    assert [(r.task, r.condition, r.outcome, r.repeat) for r in table.runs] == [
        ("t1", "A", "resolved", 0), ("t1", "B", "unresolved", 0)]
    assert table.metric_columns == ()
    assert all(v is None for v in table.runs[0].metrics.values())


def test_outcome_column_error_runs_and_resolved_may_be_empty_for_them(tmp_path):
    p = write(tmp_path, "task,condition,resolved,outcome\n"
                        "t1,A,,error\nt1,B,true,resolved\nt2,A,,unresolved\nt2,B,false,\n")
    outcomes = [r.outcome for r in read_csv(p).runs]
    assert outcomes == ["error", "resolved", "unresolved", "unresolved"]
    assert not read_csv(p).runs[0].valid
    # outcome alone is enough
    p = write(tmp_path, "task,condition,outcome\nt1,A,error\nt1,B,resolved\n")
    assert [r.outcome for r in read_csv(p).runs] == ["error", "resolved"]


def problem_text(path: Path) -> str:
    with pytest.raises(RunsError) as info:
        read_csv(path)
    assert isinstance(info.value, UsageError)  # the CLI's exit status 2
    return str(info.value)


@pytest.mark.parametrize(("body", "expected"), [
    ("task,condition,resolved\nt1,A,maybe\n",
     ":2: column 'resolved': expected true or false (or 1/0, yes/no), got 'maybe'"),
    ("task,condition,resolved,cost_usd\nt1,A,1,\nt1,B,1,1.5$\n",
     ":3: column 'cost_usd': expected a number >= 0 (or empty when not known), got '1.5$'"),
    ("task,condition,resolved,wall_s\nt1,A,1,-2\n",
     ":2: column 'wall_s': expected a number >= 0 (or empty when not known), got '-2'"),
    ("task,condition,resolved,input_tokens\nt1,A,1,inf\n",
     ":2: column 'input_tokens': expected a number >= 0"),
    ("task,condition,resolved,repeat\nt1,A,1,1.5\n",
     ":2: column 'repeat': expected an integer >= 0, got '1.5'"),
    ("task,condition,resolved\n,A,1\n", ":2: column 'task': expected a task name, got ''"),
    ("task,condition,outcome\nt1,A,crashed\n",
     ":2: column 'outcome': expected resolved or unresolved or error, got 'crashed'"),
    ("task,condition,resolved,outcome\nt1,A,true,unresolved\n",
     ":2: column 'resolved' says 'true' but column 'outcome' says 'unresolved'"),
    ("task,condition,resolved\nt1,A,1\nt1,A\n", ":3: expected 3 fields (as the header), got 2"),
    ("task,condition,resolved\nt1,A,1\nt1,A,0\n",
     ":3: the run (task 't1', condition 'A', repeat 0) is already on line 2; add a `repeat`"),
    ("task,condition,resolved,repeat\nt1,A,1,2\nt1,A,0,2\n",
     ":3: the run (task 't1', condition 'A', repeat 2) is already on line 2"),
    ("task,condtion,resolved\nt1,A,1\n",
     ":1: missing column 'condition'; did you mean 'condtion'?"),
    ("task,condition\nt1,A\n", ":1: missing column 'resolved' (or an `outcome` column)"),
    ("task,condition,resolved,task\nt1,A,1,t1\n", ":1: column 'task' appears twice"),
    ("", "empty file: expected a header line"),
    ("task,condition,resolved\n", "no runs: the file has a header and no rows"),
])
def test_bad_input_names_file_line_column_expected_and_got(tmp_path, body, expected):
    p = write(tmp_path, body)
    text = problem_text(p)
    assert str(p) in text
    assert expected in text


def test_every_problem_is_listed_not_only_the_first(tmp_path):
    p = write(tmp_path, "task,condition,resolved,cost_usd\nt1,A,x,1\nt2,A,1,y\nt3,A,1,1\n")
    text = problem_text(p)
    assert f"{p}:2: column 'resolved'" in text and f"{p}:3: column 'cost_usd'" in text


def test_a_file_that_is_not_text_is_an_error(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_bytes(b"task,condition,resolved\n\xff\xfe,A,1\n")
    assert "cannot read the runs file" in problem_text(p)
    assert "cannot read the runs file" in problem_text(tmp_path / "absent.csv")
