"""The real projects of ``real_project.py``, as data, and the source edits that make a packet.

Each ``Project`` names a pinned sdist on PyPI (version and sha256), how its packet is made from
it (which code is taken out of the base commit, which tests are cut out and planted back), and
whether the user's environment is a project ``.venv`` that ``andon init`` alone must find.

Two ways to take code out (``Project.revert``):

- ``"stub"``: a function's body (after its docstring) becomes ``raise NotImplementedError``.
  Only for a leaf: ``check_separable`` proves with ``ast`` that no other library code calls it
  and that only the cut test uses it, so the rest of the suite stays green on the base.
- ``"snippet"``: one exact block of the function is replaced by another (``Project.snippet``:
  original, reverted), taking out one behaviour. For a function that other code calls; the
  red gate and preflight of andon itself then show that the cut test, and only it, fails.
"""

from __future__ import annotations

import ast
import tarfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path


class EditError(Exception):
    pass


def unpack_sdist(sdist: Path, dest: Path) -> None:
    """Extract the sdist ``sdist`` into ``dest``: under PEP 706's ``data`` filter where this
    Python has it (3.11.4 and later); on one before (Debian 12's 3.11.2, which scripts/test
    makes .venv from) as it is. So only an archive the person running the benchmark trusts:
    real_project.py's pinned PyPI releases (their sha256 checked), or the file they name
    with gates.py's ``--real-sdist``."""
    with tarfile.open(sdist) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


@dataclass(frozen=True)
class Project:
    name: str                 # on PyPI
    version: str
    sdist: str                # file name pip downloads
    sha256: str
    package: str              # import package, in ``package_dir``
    package_dir: str          # "" or "src"
    target_file: str          # the file the packet changes (its allowed path)
    function: str
    revert: str               # "stub" or "snippet" (module docstring)
    test_file: str            # where the cut test lives in the project
    test_name: str            # top-level test class or function cut out and planted back
    planted: str              # where the packet plants it
    slug: str
    goal: str
    snippet: tuple[str, str] = ("", "")   # "snippet": (original block, reverted block)
    dev_env: bool = False     # a project .venv with '.[test]'; andon.toml from `andon init` alone
    tag: str | None = None    # tag on the sdist commit (what a VCS version plugin reads)
    constraints: list[str] = field(default_factory=list)  # pins for the .venv's test deps


MORE_ITERTOOLS = Project(
    name="more-itertools", version="10.5.0", sdist="more-itertools-10.5.0.tar.gz",
    sha256="5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
    package="more_itertools", package_dir="", target_file="more_itertools/more.py",
    function="split_into", revert="stub", test_file="tests/test_more.py",
    test_name="SplitIntoTests", planted="tests/test_split_into.py", slug="split-into",
    goal="Restore more_itertools.split_into: consecutive lists of the given sizes.")

# hatch-vcs writes src/platformdirs/version.py (git-ignored) during a build; the tests use
# pytest-mock's ``mocker`` (and appdirs). No function of it is a leaf with its own tests (every
# directory helper is reached from the public API that test_api.py runs), so the packet takes
# out one behaviour: ``$XDG_<NAME>_DIR`` as the fallback when user-dirs.dirs does not name the
# folder. Its test, ``test_user_media_dir_env_var`` (6 cases, each with ``mocker``), is planted.
PLATFORMDIRS = Project(
    name="platformdirs", version="4.3.6", sdist="platformdirs-4.3.6.tar.gz",
    sha256="357fb2acbc885b0419afd3ce3ed34564c13c9b95c89360cd9563f73aa5e2b907",
    package="platformdirs", package_dir="src", target_file="src/platformdirs/unix.py",
    function="_get_user_media_dir", revert="snippet", test_file="tests/test_unix.py",
    test_name="test_user_media_dir_env_var", planted="tests/test_media_dir_env_var.py",
    slug="media-dir-env-var",
    goal="Unix media folders fall back to $XDG_<NAME>_DIR when user-dirs.dirs does not name "
         "them.",
    snippet=("    if media_dir is None:\n"
             "        media_dir = os.environ.get(env_var, \"\").strip()\n"
             "        if not media_dir:\n"
             "            media_dir = os.path.expanduser(fallback_tilde_path)  # noqa: PTH111\n",
             "    if media_dir is None:\n"
             "        media_dir = os.path.expanduser(fallback_tilde_path)  # noqa: PTH111\n"),
    dev_env=True, tag="4.3.6",  # upstream tags its releases with the bare version
    constraints=["appdirs==1.4.4", "covdefaults==2.3.0", "coverage==7.17.5", "pytest==9.2.0",
                 "pytest-cov==7.1.0", "pytest-mock==3.17.0", "pluggy==1.7.0",
                 "iniconfig==2.3.1", "packaging==26.4", "pygments==2.21.0"])

PROJECTS = {"more-itertools": MORE_ITERTOOLS, "platformdirs": PLATFORMDIRS}


def _names(tree: ast.AST) -> list[tuple[str, int]]:
    """Every identifier used in ``tree`` (names and attribute names), with its line."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.id, node.lineno))
        elif isinstance(node, ast.Attribute):
            out.append((node.attr, node.lineno))
    return out


def _top(tree: ast.Module, name: str) -> ast.FunctionDef | ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                 and n.name == name), None)


def check_separable(p: Project, src: Path) -> None:
    """For a "stub" project: its function is called by no other library code, and only the
    cut test uses it. Raises EditError naming file and lines otherwise."""
    for py in sorted((src / p.package_dir / p.package).glob("*.py")):
        tree = ast.parse(py.read_text())
        fn = _top(tree, p.function)
        inside = range(fn.lineno, fn.end_lineno + 1) if fn and fn.end_lineno else range(0)
        if uses := [ln for name, ln in _names(tree) if name == p.function and ln not in inside]:
            raise EditError(f"{py.name} uses {p.function} at lines {uses}: not a leaf")
    for py in sorted((src / "tests").glob("*.py")):
        tree = ast.parse(py.read_text())
        test = _top(tree, p.test_name)
        inside = range(test.lineno, test.end_lineno + 1) if test and test.end_lineno \
            else range(0)
        if uses := [ln for name, ln in _names(tree) if name == p.function and ln not in inside]:
            raise EditError(f"tests/{py.name} tests {p.function} outside {p.test_name} "
                            f"at lines {uses}")


def revert(p: Project, root: Path) -> tuple[str, str]:
    """Take the packet's code out of ``root``'s target file; returns (original text, the
    text that replaced it), each occurring once in its version of the file."""
    path = root / p.target_file
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    fn = _top(ast.parse(text), p.function)
    if not isinstance(fn, ast.FunctionDef) or fn.end_lineno is None:
        raise EditError(f"{p.target_file}: no top-level function {p.function}")
    start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    original = "".join(lines[start:fn.end_lineno])
    if p.revert == "snippet":
        old, new = p.snippet
        if original.count(old) != 1:
            raise EditError(f"{p.target_file}: the snippet to revert is not in {p.function} "
                            "exactly once")
        stub = original.replace(old, new)
    else:
        doc = fn.body[0]
        has_doc = isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant) \
            and isinstance(doc.value.value, str)
        head_end = doc.end_lineno if has_doc else fn.body[0].lineno - 1
        stub = "".join(lines[start:head_end]) + "    raise NotImplementedError\n"
    path.write_text("".join(lines[:start]) + stub + "".join(lines[fn.end_lineno:]))
    return original, stub


def cut_test(p: Project, root: Path) -> tuple[str, int]:
    """Remove the test class or function from its file in ``root``; return a standalone test
    module holding it (with ``__future__`` imports, the imports and module-level helpers it
    uses) and its number of test cases (methods, or parametrize cases of a function)."""
    path = root / p.test_file
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    node = _top(tree, p.test_name)
    if node is None or node.end_lineno is None:
        raise EditError(f"{p.test_file}: no top-level {p.test_name}")
    start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
    end = node.end_lineno
    while end < len(lines) and not lines[end].strip():
        end += 1  # the blank lines after it go with it
    block = "".join(lines[start:node.end_lineno])
    path.write_text("".join(lines[:start]) + "".join(lines[end:]))

    used = {name for name, _ in _names(node)}
    header = []
    for top in tree.body:
        if isinstance(top, ast.ImportFrom) and top.module == "__future__":
            header.append(ast.unparse(top))  # annotations stay unevaluated, as in the source
        elif isinstance(top, (ast.Import, ast.ImportFrom)):
            keep = [a for a in top.names if (a.asname or a.name).split(".")[0] in used]
            if keep:
                top.names = keep
                header.append(ast.unparse(top))
        elif isinstance(top, (ast.FunctionDef, ast.ClassDef, ast.Assign)) and top is not node:
            bound = {top.name} if not isinstance(top, ast.Assign) else {
                t.id for t in top.targets if isinstance(t, ast.Name)}
            if bound & used:
                header.append(ast.get_source_segment(text, top) or "")
    if isinstance(node, ast.ClassDef):
        cases = sum(isinstance(n, ast.FunctionDef) and n.name.startswith("test")
                    for n in node.body)
    else:  # one parametrize decorator: as many cases as its list has items
        lists = [d.args[1] for d in node.decorator_list if isinstance(d, ast.Call)
                 and len(d.args) > 1 and isinstance(d.args[1], ast.List)]
        cases = len(lists[0].elts) if len(lists) == 1 else 1
    module = (f'"""{p.test_name}, cut from {p.test_file} of {p.name} {p.version}."""\n\n'
              + "\n".join(header) + "\n\n\n" + block)
    return module, cases


def packet_md(p: Project, packet_id: str) -> str:
    """The packet.md of ``p``'s packet."""
    return textwrap.dedent(f"""\
        +++
        id = "{packet_id}"
        slug = "{p.slug}"
        goal = "{p.goal}"
        allowed_paths = ["{p.target_file}"]
        +++

        ## Context

        `{p.function}` in `{p.target_file}` lacks what the goal says. The planted
        `{p.planted}` is the project's own test of it.

        ## Non-goals

        No other function changes; no test changes.
        """)


RESTORE_PY = """\
import sys
from pathlib import Path

original = Path({original!r}).read_text()
stub = Path({stub!r}).read_text()
target = Path({target!r})  # relative: cwd is the attempt's worktree
text = target.read_text()
if text.count(stub) != 1:
    sys.exit("the reverted {function} is not in " + str(target.resolve()))
target.write_text(text.replace(stub, original))
print("restored {function}; all tests pass")  # a claim andon records and ignores
"""

# every test function or method of the planted file keeps its signature and decorators but
# asserts nothing
CHEAT_PY = """\
import ast
from pathlib import Path

path = Path({planted!r})
tree = ast.parse(path.read_text())
for node in ast.walk(tree):
    if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
        node.body = [ast.Pass()]
path.write_text(ast.unparse(tree) + "\\n")
print("fixed the tests; all tests pass")  # a claim andon records and ignores
"""
