"""The exception tree in ``andon/errors.py``'s docstring is the whole truth: every exception
class defined anywhere in the package appears in it, under the parent it really inherits
from, and every class the tree names exists. Found by importing every module of the package
(not by a list kept by hand), so a new module's new exception cannot be missed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import andon
from andon import errors

# ``python -m andon`` and the scripts the harness runs in the project's interpreter: importing
# them would run them (they define no exception).
NOT_IMPORTED = {"andon.__main__", "andon.contain.boot"}

_LINE = re.compile(r"^(?P<lead>[│├└─ ]*)(?P<name>[A-Za-z_][\w.]*)(?:\s|$)")


def tree_of(doc: str) -> dict[str, str | None]:
    """The docstring's tree as ``{name: parent name}`` (the root's parent is None): from the
    line ``AndonError`` to the next blank line; a line whose drawing does not end in ``──``
    continues the description above it. A name is a class of ``andon.errors``, or
    ``module.Class`` for one defined elsewhere in andon."""
    lines = doc.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "AndonError")
    parents: dict[str, str | None] = {}
    stack: list[str] = []
    for line in lines[start:]:
        if not line.strip():
            break
        m = _LINE.match(line)
        lead = m.group("lead") if m else ""
        if not m or (lead and not lead.endswith("── ")):
            continue
        depth = len(lead) // 4
        del stack[depth:]
        name = m.group("name")
        assert name not in parents, f"{name} appears twice in the tree"
        parents[name] = stack[-1] if stack else None
        stack.append(name)
    return parents


def tree_name(cls: type) -> str:
    module = cls.__module__.removeprefix("andon.")
    return cls.__qualname__ if module == "errors" else f"{module}.{cls.__qualname__}"


def defined_exceptions() -> dict[str, type]:
    """Every exception class defined at module level in the andon package, by tree name."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(andon.__path__, "andon."):
        if info.name in NOT_IMPORTED:
            continue
        module = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[tree_name(obj)] = obj
    return found


def tree_problems(tree: dict[str, str | None], classes: dict[str, type]) -> list[str]:
    """What is wrong between the documented tree and the classes: missing, unknown, or under
    a parent the class does not inherit from."""
    problems = [f"{n} is defined but not in the tree of errors.py" for n in classes
                if n not in tree]
    problems += [f"the tree names {n}, which andon does not define" for n in tree
                 if n not in classes]
    for name, parent in tree.items():
        if name in classes and parent in classes \
                and not issubclass(classes[name], classes[parent]):
            problems.append(f"{name} is drawn under {parent} but does not inherit from it")
    return problems


def test_every_exception_of_the_package_is_in_the_tree():
    classes = defined_exceptions()
    tree = tree_of(errors.__doc__ or "")
    assert tree_problems(tree, classes) == []
    assert tree["AndonError"] is None
    # one tree: everything andon raises on purpose can be caught as AndonError
    assert all(issubclass(c, errors.AndonError) for c in classes.values())
    # the walk really reaches the modules outside errors.py
    assert {"git.repo.RefMoved", "budget.Exceeded",
            "review.contract.ReviewRejected"} <= set(classes)


def test_a_class_left_out_or_misplaced_is_named():
    """The check itself: a stray class, a stale name and a wrong parent are each reported."""
    class Stray(Exception):
        pass

    classes = {"AndonError": errors.AndonError, "UsageError": errors.UsageError,
               "GitError": errors.GitError, "x.Stray": Stray}
    tree = {"AndonError": None, "UsageError": "AndonError", "GitError": "UsageError",
            "Gone": "AndonError"}
    assert tree_problems(tree, classes) == [
        "x.Stray is defined but not in the tree of errors.py",
        "the tree names Gone, which andon does not define",
        "GitError is drawn under UsageError but does not inherit from it"]


def test_the_tree_is_read_from_the_drawing():
    doc = ("Intro.\n\nAndonError\n├── A   text\n│       goes on\n│   └── B   more (x)\n"
           "└── m.C\n\nAfter, not a node.\n")
    assert tree_of(doc) == {"AndonError": None, "A": "AndonError", "B": "A", "m.C": "AndonError"}


@pytest.mark.parametrize("cls", [errors.InvalidValue, errors.InvalidArgument])
def test_value_errors_stay_value_errors(cls):
    """Where a ValueError is part of the contract (callers and pydantic catch ValueError),
    the tree's class is one too."""
    assert issubclass(cls, ValueError) and issubclass(cls, errors.AndonError)


def bare_value_errors(source: str) -> list[int]:
    """Lines of ``source`` that raise the builtin ValueError itself (class or call)."""
    import ast
    return sorted(n.lineno for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Raise) and n.exc is not None
            and isinstance(f := n.exc.func if isinstance(n.exc, ast.Call) else n.exc, ast.Name)
            and f.id == "ValueError")


def test_andon_raises_no_bare_value_error():
    """A bare ValueError is outside the tree: the CLI would have to catch it apart from
    AndonError. pydantic validators raise InvalidValue (a ValueError, as pydantic needs)."""
    src = Path(andon.__file__).parent
    found = [f"{p.relative_to(src)}:{line}" for p in sorted(src.rglob("*.py"))
             for line in bare_value_errors(p.read_text(encoding="utf-8"))]
    assert found == []
    assert bare_value_errors("def f():\n    raise ValueError('x')\n\nraise ValueError\n") == [2, 4]
    assert bare_value_errors("raise errors.InvalidValue('x')\nraise\n") == []
