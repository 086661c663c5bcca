"""A module's namespace written under another name or through a function (the alias holes of
``monkeypatch`` and ``dynamic-attr``), and a literal container bound to a name read where
``copied-literal`` looks. Rule functions on source texts, as test_patterns_net.py; the
end-to-end cheats are in tests/redteam/scenarios_static.py."""

from __future__ import annotations

import textwrap

import pytest

from andon.gates.patterns import planted_literals, scan_file

ALL = set(range(1, 400))
# the real gate passes the project's own top-level names: calc is the project here
OWN = frozenset({"calc"})
HEAD = ("import sys\nimport operator\nimport importlib\nfrom calc import ops\n"
        "from calc.ops import add\n\n\ndef _mul(a, b):\n    return a * b\n\n\n")


def rules(src: str, *, test: bool = False, **kw) -> set[str]:
    path = "tests/test_x.py" if test else "src/calc/m.py"
    return {h.rule for h in scan_file(path, HEAD + textwrap.dedent(src) + "\n", ALL,
                                      is_test=test, own=OWN, **kw)}


@pytest.mark.parametrize("code", [
    # the namespace bound to a name, then written
    "_ns = vars(ops)\n_ns['mul'] = _mul",
    "_ns = vars(ops)\n_ns.update(mul=_mul)",
    "_ns = vars(ops)\n_ns.setdefault('mul', _mul)",
    "_ns = vars(ops)\ndel _ns['mul']",
    "_ns = ops.__dict__\n_ns['mul'] = _mul",
    "_ns = ops.__dict__\n_ns.update(mul=_mul)",
    "_ns = vars(ops)\nd = _ns\nd['mul'] = _mul",
    "_ns = vars(ops)\n_ns |= {'mul': _mul}",
    "vars(ops)['mul']: object = _mul",
    "import calc.ops\ncalc.ops.mul: object = _mul",
    "def install():\n    ns = vars(ops)\n    ns['mul'] = _mul",
    "(_ns := vars(ops))['mul'] = _mul",
    # the dict's methods called through the class, or operator's functions
    "dict.update(vars(ops), mul=_mul)",
    "dict.__setitem__(ops.__dict__, 'mul', _mul)",
    "dict.setdefault(vars(ops), 'mul', _mul)",
    "operator.setitem(vars(ops), 'mul', _mul)",
    "operator.setitem(ops.__dict__, 'mul', _mul)",
    "operator.delitem(vars(ops), 'mul')",
    "from operator import setitem\nsetitem(vars(ops), 'mul', _mul)",
    "_ns = vars(ops)\noperator.setitem(_ns, 'mul', _mul)",
    # a function's __globals__: the namespace of the module that defined it
    "add.__globals__['mul'] = _mul",
    "add.__globals__.update(mul=_mul)",
    "g = add.__globals__\ng['mul'] = _mul",
    "ops.add.__globals__['mul'] = _mul",
    "operator.setitem(add.__globals__, 'mul', _mul)",
    "def install(f):\n    f.__globals__['mul'] = _mul",
    # the module reached through sys.modules or an import call
    "sys.modules['calc.ops'].__dict__['mul'] = _mul",
    "sys.modules['calc.ops'].mul = _mul",
    "_m = sys.modules\n_m['calc.ops'].mul = _mul",
    "_m = sys.modules\nvars(_m['calc.ops'])['mul'] = _mul",
    "__import__('calc.ops', fromlist=['x']).mul = _mul",
    "vars(__import__('calc.ops', fromlist=['x']))['mul'] = _mul",
    "setattr(__import__('calc.ops', fromlist=['x']), 'mul', _mul)",
    "importlib.import_module('calc.ops').__dict__['mul'] = _mul",
])
def test_a_modules_namespace_written_under_another_name_is_monkeypatch(code):
    assert compile(HEAD + textwrap.dedent(code), "m.py", "exec")
    assert "monkeypatch" in rules(code), code


@pytest.mark.parametrize("code", [
    "import argparse\nargs = argparse.Namespace(a=1)\nd = vars(args)\nd['b'] = 2",
    "class C:\n    pass\n\n\nobj = C()\nd = vars(obj)\nd['x'] = 1\nd.update(y=2)",
    "d = dict(vars(ops))\nd['mul'] = _mul",
    "_ns = vars(ops)\nx = _ns.get('mul')\nnames = sorted(_ns)",
    "_ns = vars(ops)\n_ns = {}\n_ns['mul'] = _mul",
    "d = {}\noperator.setitem(d, 'k', 1)\ndict.update(d, a=1)",
    "def _local():\n    pass\n\n\n_local.__globals__['x'] = 1",
    "for k, v in add.__globals__.items():\n    print(k, v)",
    "x = sys.modules['calc.ops'].mul",
])
def test_a_dict_the_code_owns_or_a_namespace_only_read_is_not(code):
    assert "monkeypatch" not in rules(code), code


@pytest.mark.parametrize("test", [False, True], ids=["code", "test"])
@pytest.mark.parametrize("code", [
    "d = sys.__dict__",
    "import os\nenv = os.__dict__",
    "import json\n\n\ndef f(n, v):\n    ns = json.__dict__\n    ns[n] = v",
    "import json\n\n\ndef f(n, v):\n    vars(json)[n] = v",
    "import json\n\n\ndef f(n, v):\n    operator.setitem(vars(json), n, v)",
    "import json\n\n\ndef f(n, v):\n    json.dumps.__globals__.update({n: v})",
])
def test_a_sensitive_or_foreign_namespace_by_computed_name_is_dynamic_attr(code, test):
    assert "dynamic-attr" in rules(code, test=test), code


@pytest.mark.parametrize("code", [
    "def f(n, v):\n    vars(ops)[n] = v",  # the project's own module: monkeypatch's, in code
    "import json\n\n\nx = vars(json)['dumps']",
    "import json\n\n\ndef f(v):\n    vars(json)['dumps'] = v",  # a literal name
    "import argparse\n\n\ndef f(n):\n    d = vars(argparse.Namespace())\n    d[n] = 1",
])
def test_a_literal_name_or_the_projects_own_module_is_not_dynamic_attr(code):
    assert "dynamic-attr" not in rules(code, test=True), code


# -- copied-literal: a literal container bound once to a name -----------------------------

MUL_TEST = "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
KNOWN = {
    "module-tuple-slice": "_KNOWN = (3, 4, 12)\n\n\ndef mul(a, b):\n"
                          "    if (a, b) == _KNOWN[:2]:\n        return _KNOWN[2]\n"
                          "    return a + b\n",
    "function-list": "def mul(a, b):\n    known = [3, 4, 12]\n"
                     "    if [a, b] == known[:2]:\n        return known[-1]\n    return a + b\n",
    "indexed-by-input": "_ANSWERS = [7, 12]\n\n\ndef mul(a, b):\n    return _ANSWERS[a - 3]\n",
    "annotated": "_K: tuple[int, ...] = (3, 4, 12)\n\n\ndef mul(a, b):\n"
                 "    return _K[-1]\n",
    "in-tuple": "_INPUTS = (3, 4)\n\n\ndef mul(a, b):\n    if a in _INPUTS:\n"
                "        return a * b\n    return a + b\n",
}


@pytest.mark.parametrize("code", list(KNOWN.values()), ids=list(KNOWN))
def test_a_name_bound_to_a_tuple_of_tested_values_is_a_copied_literal(code):
    assert "copied-literal" in rules(code, copied=planted_literals([MUL_TEST])), code


@pytest.mark.parametrize("code", [
    # bound twice: not one value the rule can follow
    "_K = (3, 4, 12)\n_K = (5, 6, 30)\n\n\ndef mul(a, b):\n    return _K[2] if a else 0\n",
    # bound once but never compared or returned
    "_K = (3, 4, 12)\n\n\ndef mul(a, b):\n    print(_K)\n    return a * b\n",
    # the constant index picks an element that is no tested value
    "_K = (3, 4, 12, 5)\n\n\ndef mul(a, b):\n    if a == _K[3]:\n        return 0\n"
    "    return a * b\n",
    # compared, but holding no tested value
    "_K = (5, 6)\n\n\ndef mul(a, b):\n    if a in _K:\n        return a * b\n    return a * b\n",
    # a parameter of the same name is not the module's tuple
    "_K = (3, 4, 12)\n\n\ndef mul(a, b, _K=()):\n    return a * b if _K == () else 0\n",
])
def test_a_name_not_bound_once_to_tested_values_or_not_read_is_not(code):
    assert "copied-literal" not in rules(code, copied=planted_literals([MUL_TEST])), code


def test_a_named_tuple_the_base_file_already_had_is_not_copied():
    base = KNOWN["module-tuple-slice"]
    moved = "class Ops:\n    pass\n\n\n" + base
    copied = planted_literals([MUL_TEST])
    assert "copied-literal" not in rules(moved, copied=copied, base=HEAD + base + "\n")
    assert "copied-literal" in rules(moved, copied=copied, base=HEAD)


# -- monkeypatch: a module bound by `from P import N` ----------------------------------------

# the project's modules, as the gate lists them from the tree (src/ is a source root)
MODULES = frozenset({"calc", "calc.ops", "calc.models", "app", "app.settings"})
FROM_CHEATS = [
    "ops.mul = lambda a, b: a * b",
    "setattr(ops, 'mul', _mul)",
    "delattr(ops, 'mul')",
    "ops.__setattr__('mul', _mul)",
    "from calc import ops as o\no.mul = _mul",
    "from app import settings\nsettings.debug = True",  # settings.py is a module: a module store
    "from os import path\npath.join = _mul",  # the standard library's module
]


@pytest.mark.parametrize("code", FROM_CHEATS)
def test_a_module_bound_by_a_from_import_is_monkeypatched(code):
    assert "monkeypatch" in rules(code, modules=MODULES), code


def test_a_relative_from_import_of_a_sibling_module_is_monkeypatched():
    src = "from . import ops\n\nops.mul = lambda a, b: a * b\n"
    hits = scan_file("src/calc/__init__.py", src, ALL, own=OWN, modules=MODULES,
                     roots=("", "src"))
    assert "monkeypatch" in {h.rule for h in hits}


@pytest.mark.parametrize("code", [
    "from calc.models import Config\nConfig.debug = True",  # a class, not a module
    "from calc.models import Config\nsetattr(Config, 'debug', True)",
    "from calc.ops import add\nadd.cache = {}",  # a function of a module
    "from calc import ops\nx = ops.mul",  # only read
    "from os import sep\nsep.x = 1",  # os.sep is a string
])
def test_a_from_import_that_is_no_module_is_not_monkeypatched(code):
    assert "monkeypatch" not in rules(code, modules=MODULES), code


def test_without_the_file_list_a_from_import_stays_unknown():
    assert "monkeypatch" not in rules("ops.mul = _mul")
