"""Packet files: parsing, every problem kind with its line, discovery, globs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from andon.errors import PacketError, Problem
from andon.packet import (
    Packet,
    check_packets,
    load_packets,
    parse_packet_file,
    path_matches,
)


def packet_text(*front: str, packet_id: str = "A", body: str = "Body.\n") -> str:
    """A packet whose required fields sit on lines 2-4, so ``front`` starts on line 5."""
    lines = ["+++", f'id = "{packet_id}"', 'slug = "a-slug"', 'goal = "make it so"', *front]
    return "\n".join(lines) + "\n+++\n" + body


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def check(tmp_path: Path, files: dict[str, str]) -> tuple[list[Packet], list[Problem]]:
    """Write ``files`` (relative to packets/) and run check_packets on them."""
    for name, text in files.items():
        write(tmp_path / "packets" / name, text)
    return check_packets(tmp_path / "packets", tmp_path)


def only_problem(tmp_path: Path, text: str) -> Problem:
    _, problems = check(tmp_path, {"A.md": text})
    assert len(problems) == 1, problems
    assert problems[0].path == tmp_path / "packets" / "A.md"
    return problems[0]


# --- loading valid packets -------------------------------------------------------------


def test_directory_packet_with_plant_and_hidden_files(tmp_path: Path) -> None:
    pdir = tmp_path / "packets" / "B01-loader"
    write(pdir / "packet.md", packet_text('requires = []', body="## Context\nLoad it.\n"))
    test_file = write(pdir / "plant" / "tests" / "test_loader.py", "def test(): assert False\n")
    write(pdir / "plant" / "conftest.py", "")
    hidden = write(pdir / "hidden" / "tests" / "test_hidden.py", "x = 1\n")

    packets, problems = check_packets(tmp_path / "packets", tmp_path)

    assert problems == []
    [packet] = packets
    assert packet.source == pdir / "packet.md"
    assert packet.dir == pdir
    assert packet.plant_files == {
        "conftest.py": (pdir / "plant" / "conftest.py").absolute(),
        "tests/test_loader.py": test_file.absolute(),
    }
    assert list(packet.plant_files) == sorted(packet.plant_files)
    assert packet.hidden_files == {"tests/test_hidden.py": hidden.absolute()}
    assert packet.body == "## Context\nLoad it.\n"
    assert len(packet.content_sha) == 64


def test_content_sha_is_stable_and_follows_every_file(tmp_path: Path) -> None:
    pdir = tmp_path / "packets" / "A"
    write(pdir / "packet.md", packet_text())
    plant = write(pdir / "plant" / "tests" / "test_a.py", "assert 1\n")
    hidden = write(pdir / "hidden" / "h.py", "h\n")

    def sha() -> str:
        packet, problems = parse_packet_file(pdir / "packet.md", tmp_path / "packets")
        assert problems == [] and packet is not None
        return packet.content_sha

    first = sha()
    assert sha() == first
    plant.write_text("assert 2\n")
    after_plant = sha()
    assert after_plant != first
    hidden.write_text("changed\n")
    after_hidden = sha()
    assert after_hidden != after_plant
    plant.rename(pdir / "plant" / "tests" / "test_b.py")  # same bytes, new planted path
    assert sha() != after_hidden


def test_flat_packet_and_defaults(tmp_path: Path) -> None:
    text = packet_text("[[invariants]]", 'id = "I1"', 'assert = "loader returns a dict"')
    packets, problems = check(tmp_path, {"A.md": text})
    assert problems == []
    [packet] = packets
    assert packet.dir is None
    assert packet.source == tmp_path / "packets" / "A.md"
    assert packet.plant_files == {} and packet.hidden_files == {}
    defaults = (packet.gate, packet.max_attempts, packet.requires, packet.stages, packet.tier)
    assert defaults == ("auto", 3, [], None, None)
    assert packet.invariants[0].assert_ == "loader returns a dict"
    assert packet.invariants[0].critical is False


def test_readme_dotfiles_and_other_files_are_not_packets(tmp_path: Path) -> None:
    packets, problems = check(
        tmp_path,
        {
            "README.md": "# Packets\nNo front matter here.\n",
            ".draft.md": "not a packet\n",
            "notes.txt": "ignored\n",
            "A.md": packet_text(),
        },
    )
    assert problems == []
    assert [p.id for p in packets] == ["A"]


def test_directory_without_packet_md_is_reported(tmp_path: Path) -> None:
    write(tmp_path / "packets" / "B02" / "PACKET.MD.txt", "")
    _, problems = check_packets(tmp_path / "packets", tmp_path)
    message = "packet directory has no packet.md"
    assert problems == [Problem(tmp_path / "packets" / "B02", None, message)]


def test_body_sections_split_on_level_two_headings(tmp_path: Path) -> None:
    body = (
        "Intro.\n## Context\nWhy.\n### Detail\nmore\n"
        "## Non-Goals\nNo UI.\n```\n## not a heading\n```\n"
    )
    [packet], _ = check(tmp_path, {"A.md": packet_text(body=body)})
    sections = packet.body_sections()
    assert sections[""] == "Intro."
    assert sections["context"] == "Why.\n### Detail\nmore"
    assert sections["non-goals"] == "No UI.\n```\n## not a heading\n```"
    assert list(sections) == ["", "context", "non-goals"]


def test_load_packets_sorts_by_id_and_raises_with_every_problem(tmp_path: Path) -> None:
    check(tmp_path, {"1.md": packet_text(packet_id="Z"), "2.md": packet_text(packet_id="B")})
    assert [p.id for p in load_packets(tmp_path / "packets", tmp_path)] == ["B", "Z"]

    broken = packet_text("max_attempts = 0", "gate = 'x'", packet_id="C")
    write(tmp_path / "packets" / "3.md", broken)
    with pytest.raises(PacketError) as caught:
        load_packets(tmp_path / "packets", tmp_path)
    assert [p.line for p in caught.value.problems] == [5, 6]


def test_missing_packets_folder(tmp_path: Path) -> None:
    packets, problems = check_packets(tmp_path / "nowhere", tmp_path)
    assert packets == []
    [problem] = problems
    assert (problem.path, problem.line) == (tmp_path / "nowhere", None)
    assert "does not exist" in problem.message and "andon init" in problem.message


# --- 1, 2: front matter and TOML -----------------------------------------------------


def test_no_front_matter(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, "# A packet\nid = 'A'\n")
    assert problem.line == 1
    assert "must start with a '+++' line" in problem.message


def test_unterminated_front_matter(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '+++\nid = "A"\n++\nbody\n')
    assert problem.line == 1
    assert "never closed" in problem.message


def test_toml_syntax_error_points_at_file_line(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, packet_text("tier = ", 'gate = "auto"'))
    assert problem.line == 5
    assert problem.message.startswith("invalid TOML in front matter: Invalid value")


# --- 3, 4, 5: fields -----------------------------------------------------------------


def test_unknown_field_suggests_closest(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, packet_text('gate = "auto"', "mxa_attempts = 2"))
    assert problem.line == 6
    assert problem.message == "unknown field 'mxa_attempts'; did you mean 'max_attempts'?"


def test_unknown_field_without_near_match_lists_known_fields(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, packet_text('colour = "red"'))
    assert problem.line == 5
    assert "unknown field 'colour'; known fields: id, slug, goal," in problem.message


def test_unknown_field_in_invariant(tmp_path: Path) -> None:
    text = packet_text("[[invariants]]", 'id = "I1"', 'asert = "x"', 'assert = "y"')
    problem = only_problem(tmp_path, text)
    assert problem.line == 7
    assert problem.message == "invariant 1: unknown field 'asert'; did you mean 'assert'?"


def test_missing_required_field_is_on_line_one(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, '+++\nid = "A"\n\nslug = "s"\n+++\n')
    assert problem.line == 1
    assert problem.message == "missing required field 'goal'"


def test_missing_invariant_field_is_on_its_table_header(tmp_path: Path) -> None:
    text = packet_text(
        "[[invariants]]", 'id = "I1"', 'assert = "x"', "", "[[invariants]]", 'id = "I2"'
    )
    problem = only_problem(tmp_path, text)
    assert problem.line == 9
    assert problem.message == "invariant 2: missing required field 'assert'"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("max_attempts = 0", "max_attempts must be an integer >= 1, got 0"),
        ('max_attempts = "3"', "max_attempts must be an integer >= 1, got '3'"),
        ('gate = "robot"', "gate must be 'auto' or 'human', got 'robot'"),
        ("tier = 2", "tier must be a string, got 2"),
        ('requires = "B"', "requires must be a list of packet ids, got 'B'"),
        ('requires = ["x y"]', "requires entry 1 must be a packet id"),
        ('stages = ["atdd", "deploy"]', "stages entry 2 must be one of: atdd, implement"),
        ('spec_path = "s.md"\nspec_commit = "xyz"', "spec_commit must be 4 to 40 hexadecimal"),
    ],
)
def test_invalid_value_reports_constraint_value_and_line(
    tmp_path: Path, line: str, expected: str
) -> None:
    write(tmp_path / "s.md", "spec\n")
    problem = only_problem(tmp_path, packet_text("# comment", line))
    assert problem.line == 6 + line.count("\n")
    assert problem.message.startswith(expected), problem.message


def test_invalid_required_values(tmp_path: Path) -> None:
    text = '+++\nid = "bad id"\nslug = "-s"\ngoal = "  "\n+++\n'
    _, problems = check(tmp_path, {"A.md": text})
    assert [(p.line, p.message.split(",")[0]) for p in problems] == [
        (2, "id must be letters"),
        (3, "slug must be letters"),
        (4, "goal must be a non-empty string"),
    ]
    assert problems[0].message.endswith("got 'bad id'")


def test_invalid_invariant_value_is_on_its_key_in_the_right_table(tmp_path: Path) -> None:
    text = packet_text(
        "[[invariants]]", 'id = "I1"', "critical = true", 'assert = "x"',
        "[[invariants]]", 'id = "I2"', 'assert = "y"', 'critical = "yes"',
    )
    problem = only_problem(tmp_path, text)
    assert problem.line == 12
    assert problem.message == "invariant 2: critical must be true or false, got 'yes'"


def test_key_lines_ignore_text_inside_multiline_strings(tmp_path: Path) -> None:
    text = (
        '+++\nid = "A"\nslug = "s"\ngoal = """\nmax_attempts = 9 is how\nnot to\n"""\n'
        "max_attempts = -1\n+++\n"
    )
    problem = only_problem(tmp_path, text)
    assert problem.line == 8
    assert problem.message == "max_attempts must be an integer >= 1, got -1"


# --- 6, 7, 8: ids and requires -------------------------------------------------------


def test_duplicate_packet_id_reported_on_second_file(tmp_path: Path) -> None:
    write(tmp_path / "packets" / "A01" / "packet.md", packet_text())
    _, problems = check(tmp_path, {"A02.md": packet_text()})
    [problem] = problems
    assert (problem.path, problem.line) == (tmp_path / "packets" / "A02.md", 2)
    assert problem.message.startswith("duplicate packet id 'A'")
    assert str(tmp_path / "packets" / "A01" / "packet.md") in problem.message


def test_duplicate_invariant_id(tmp_path: Path) -> None:
    text = packet_text(
        "[[invariants]]", 'id = "I1"', 'assert = "x"', "[[invariants]]", 'assert = "y"', 'id = "I1"'
    )
    problem = only_problem(tmp_path, text)
    assert problem.line == 10
    assert "duplicate invariant id 'I1'" in problem.message


def test_requires_unknown_id(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {"A.md": packet_text('requires = ["B01"]'), "B.md": packet_text(packet_id="B02")},
    )
    [problem] = problems
    assert (problem.path.name, problem.line) == ("A.md", 5)
    assert problem.message == "requires names unknown packet id 'B01'; did you mean 'B02'?"


def test_requires_unknown_id_never_suggests_the_packet_itself(tmp_path: Path) -> None:
    # C01 requiring a misspelt C03 was told "did you mean 'C01'?", i.e. itself
    _, problems = check(tmp_path, {"A.md": packet_text('requires = ["C02"]', packet_id="C01")})
    [problem] = problems
    assert problem.message == "requires names unknown packet id 'C02'"


def test_requires_a_broken_packet_is_not_called_unknown(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text('requires = ["B"]'),
            "B.md": packet_text("max_attempts = 0", packet_id="B"),
        },
    )
    assert [(p.path.name, p.line) for p in problems] == [("B.md", 5)]


def test_requires_itself(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, packet_text('requires = ["A"]'))
    assert problem.line == 5
    assert problem.message == "packet 'A' requires itself"


def test_requires_cycle_reported_once_per_member(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text('requires = ["B"]', packet_id="A"),
            "B.md": packet_text('gate = "human"', 'requires = ["C"]', packet_id="B"),
            "C.md": packet_text('requires = ["A"]', packet_id="C"),
            # D depends on the cycle but is not in it
            "D.md": packet_text('requires = ["A"]', packet_id="D"),
        },
    )
    assert [(p.path.name, p.line, p.message) for p in problems] == [
        ("A.md", 5, "requires forms a cycle: A -> B -> C -> A"),
        ("B.md", 6, "requires forms a cycle: B -> C -> A -> B"),
        ("C.md", 5, "requires forms a cycle: C -> A -> B -> C"),
    ]


def test_broken_packet_still_gets_its_requires_checked(tmp_path: Path) -> None:
    """A packet whose fields do not parse still has its readable id and requires checked:
    the unknown id is reported on the line of its entry, beside the field error."""
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text("max_attempts = 0", "requires = [", '  "B",', '  "Zed",', "]"),
            "B.md": packet_text(packet_id="B"),
        },
    )
    assert [(p.path.name, p.line, p.message) for p in problems] == [
        ("A.md", 5, "max_attempts must be an integer >= 1, got 0"),
        ("A.md", 8, "requires names unknown packet id 'Zed'"),
    ]


def test_cycle_through_broken_packets_is_reported_on_every_member(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text("mxa_attempts = 1", 'requires = ["B"]', packet_id="A"),
            "B.md": packet_text('requires = ["A"]', 'gate = "robot"', packet_id="B"),
        },
    )
    assert [(p.path.name, p.line, p.message.split(",")[0]) for p in problems] == [
        ("A.md", 5, "unknown field 'mxa_attempts'; did you mean 'max_attempts'?"),
        ("A.md", 6, "requires forms a cycle: A -> B -> A"),
        ("B.md", 5, "requires forms a cycle: B -> A -> B"),
        ("B.md", 6, "gate must be 'auto' or 'human'"),
    ]


def test_broken_packet_requiring_itself_and_its_duplicate_id(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text(packet_id="A"),
            "B.md": packet_text("max_attempts = 0", 'requires = ["A", "B2", "B2"]', packet_id="A"),
        },
    )
    assert [(p.path.name, p.line, p.message.split(":")[0]) for p in problems] == [
        ("B.md", 2, "duplicate packet id 'A'"),
        ("B.md", 5, "max_attempts must be an integer >= 1, got 0"),
        ("B.md", 6, "packet 'A' requires itself"),
        ("B.md", 6, "requires names unknown packet id 'B2'"),
    ]


def test_cycle_is_reported_on_the_line_of_the_entry_that_closes_it(tmp_path: Path) -> None:
    _, problems = check(
        tmp_path,
        {
            "A.md": packet_text("requires = [", '  "C",  # first', '  "B",', "]", packet_id="A"),
            "B.md": packet_text('requires = ["A"]', packet_id="B"),
            "C.md": packet_text(packet_id="C"),
        },
    )
    assert [(p.path.name, p.line, p.message) for p in problems] == [
        ("A.md", 7, "requires forms a cycle: A -> B -> A"),
        ("B.md", 5, "requires forms a cycle: B -> A -> B"),
    ]


def test_requiring_a_packet_whose_id_cannot_be_read_says_so(tmp_path: Path) -> None:
    """B's front matter is not TOML, so its id is unknown: A's requires of "B" may be right,
    and the message must say where the unreadable packet is instead of only "unknown"."""
    _, problems = check(
        tmp_path,
        {"A.md": packet_text('requires = ["B"]'), "B.md": '+++\nid = "B\n+++\n'},
    )
    assert [(p.path.name, p.line) for p in problems] == [("A.md", 5), ("B.md", 2)]
    assert problems[0].message == (
        "requires names unknown packet id 'B' (the id of B.md could not be read)"
    )


def test_stage_typo_suggests_the_stage(tmp_path: Path) -> None:
    problem = only_problem(tmp_path, packet_text('stages = ["implment"]'))
    assert problem.message.endswith("got 'implment'; did you mean 'implement'?"), problem.message


# --- 9, 10: globs --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("", "must not be empty"),
        ("/etc/**", "must be relative to the repository root"),
        ("src/../secrets", "must not contain a '..' component"),
        ("src\\\\a.py", "must use '/' and contain no backslash"),
        ("tests/[ab.py", "has unbalanced '[' / ']'"),
        ("src/{a,b/*.py", "has unbalanced '{' / '}'"),
    ],
)
@pytest.mark.parametrize("key", ["allowed_paths", "forbidden_paths"])
def test_invalid_glob(tmp_path: Path, key: str, pattern: str, expected: str) -> None:
    text = packet_text("gate = 'auto'", f'{key} = [\n  "docs/**",\n  "{pattern}",\n]')
    problem = only_problem(tmp_path, text)
    assert problem.line == 6
    assert problem.message.startswith(f"{key} entry 2 {expected}"), problem.message


def test_same_pattern_allowed_and_forbidden(tmp_path: Path) -> None:
    text = packet_text('forbidden_paths = ["src/x/**"]', 'allowed_paths = ["src/**", "src/x/**"]')
    problem = only_problem(tmp_path, text)
    assert problem.line == 6
    assert problem.message == "allowed_paths entry 'src/x/**' also appears in forbidden_paths"


def test_allowed_literal_path_matched_by_forbidden_glob(tmp_path: Path) -> None:
    text = packet_text(
        'allowed_paths = ["src/app/secret.py", "src/app/*.py"]',
        'forbidden_paths = ["**/secret.py"]',
    )
    problem = only_problem(tmp_path, text)
    assert problem.line == 5
    assert problem.message == (
        "allowed_paths entry 'src/app/secret.py' is forbidden by forbidden_paths '**/secret.py'"
    )


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("src/a/b.py", ["src/**"], True),
        ("src/a/b.py", ["src/*.py"], False),
        ("src/b.py", ["src/*.py"], True),
        ("tests/unit/test_x.py", ["**/test_*.py"], True),
        ("test_x.py", ["**/test_*.py"], True),
        ("tests/x_test.py", ["**/test_*.py"], False),
        ("src/.env", ["src/**"], True),
        (".github/workflows/ci.yml", ["**/*.yml"], True),
        (".env", ["*"], True),
        ("docs/a.md", ["src/**", "docs/*.md"], True),
        ("docs/a.md", [], False),
    ],
)
def test_path_matches(path: str, patterns: list[str], expected: bool) -> None:
    assert path_matches(path, patterns) is expected


# --- 11, 12: plant files and spec ----------------------------------------------------


def test_empty_plant_directory(tmp_path: Path) -> None:
    pdir = tmp_path / "packets" / "A"
    write(pdir / "packet.md", packet_text())
    (pdir / "plant" / "tests").mkdir(parents=True)
    packets, problems = check_packets(tmp_path / "packets", tmp_path)
    assert problems == [Problem(pdir / "plant", None, "plant/ exists but contains no files")]
    assert [p.id for p in packets] == ["A"]


def test_symlink_in_plant_directory(tmp_path: Path) -> None:
    pdir = tmp_path / "packets" / "A"
    write(pdir / "packet.md", packet_text())
    write(pdir / "plant" / "tests" / "test_real.py", "")
    target = write(tmp_path / "elsewhere.py", "")
    os.symlink(target, pdir / "plant" / "tests" / "test_link.py")
    [packet], problems = check_packets(tmp_path / "packets", tmp_path)
    [problem] = problems
    assert (problem.path, problem.line) == (pdir / "plant" / "tests" / "test_link.py", None)
    assert "must be regular files, got a symlink" in problem.message
    assert list(packet.plant_files) == ["tests/test_real.py"]


def test_spec_path_must_exist_in_repo(tmp_path: Path) -> None:
    text = packet_text('spec_commit = "abc123"', 'spec_path = "docs/spec.md"')
    problem = only_problem(tmp_path, text)
    assert problem.line == 6
    assert problem.message == (
        "spec_path must name an existing file in the repository, got 'docs/spec.md'"
    )
    write(tmp_path / "docs" / "spec.md", "# Spec\n")
    assert check_packets(tmp_path / "packets", tmp_path)[1] == []


@pytest.mark.parametrize(
    ("given", "missing"), [("spec_path", "spec_commit"), ("spec_commit", "spec_path")]
)
def test_spec_path_and_commit_come_together(tmp_path: Path, given: str, missing: str) -> None:
    write(tmp_path / "spec.md", "")
    value = "spec.md" if given == "spec_path" else "abcdef0"
    problem = only_problem(tmp_path, packet_text("tier = 'small'", f'{given} = "{value}"'))
    assert problem.line == 6
    assert problem.message.startswith(f"{given} is set but {missing} is not")


# --- all at once ---------------------------------------------------------------------


def test_every_problem_in_every_file_is_reported_sorted(tmp_path: Path) -> None:
    packets, problems = check(
        tmp_path,
        {
            "A.md": packet_text(
                "max_attempts = 0", 'gate = "never"', "bogus = 1", 'requires = ["Q"]'
            ),
            "B.md": "no front matter\n",
            "C.md": packet_text('slug = "dup"', packet_id="C"),
            "D/packet.md": packet_text('requires = ["Q"]', packet_id="D"),
            "E.md": packet_text(packet_id="D"),
        },
    )
    packets_dir = tmp_path / "packets"
    assert [(p.path.relative_to(packets_dir).as_posix(), p.line) for p in problems] == [
        ("A.md", 5),
        ("A.md", 6),
        ("A.md", 7),
        ("A.md", 8),  # A's fields are broken, but its requires are still checked
        ("B.md", 1),
        ("C.md", 5),
        ("D/packet.md", 5),
        ("E.md", 2),
    ]
    assert "unknown packet id 'Q'" in problems[3].message
    assert problems[6].message == (
        "requires names unknown packet id 'Q' (the ids of B.md, C.md could not be read)")
    assert [p.id for p in packets] == ["D", "D"]
