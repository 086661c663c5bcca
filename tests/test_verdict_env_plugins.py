"""What the verdict channel accepts as the environment's own doing after it armed: a plugin an
installed distribution registers late (pytest-benchmark registers its session object in
``pytest_configure``), pytest's warning registry on a runner module, pytest's own classes. And
what it does not: the same shapes made or changed by the code under test. Real pytest in a real
venv holding a small installed plugin distribution, real subprocesses."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from project_python import build_project_python

from andon.runners.pytest import run_suite

from helpers import write_tree

TEST = "tests/test_calc.py"
FILES = {
    "src/calc/__init__.py": "def mul(a, b):\n    return a * b\n",
    TEST: "from calc import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n",
}
# like pytest-benchmark: the plugin module makes its session object in pytest_configure and
# registers it then, after andon armed; the session's class lives in another module
BENCH_PLUGIN = '''
from benchlike.session import BenchSession


def pytest_configure(config):
    config.pluginmanager.register(BenchSession(config), "benchlike-session")
'''
BENCH_SESSION = '''
class BenchSession:
    def __init__(self, config):
        self.config = config
        self.n = 0

    def pytest_runtest_logreport(self, report):
        assert report is not None, "pytest rewrites this assert: -p imports it so"
        self.n += 1


def helper():
    return 1
'''


@pytest.fixture(scope="module")
def bench_python(tmp_path_factory) -> Path:
    """A project venv with an installed plugin distribution ``benchlike`` in site-packages."""
    where = tmp_path_factory.mktemp("benchvenv") / "venv"
    python = build_project_python(where)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(where),
                                                        "platbase": str(where)}))
    pkg = purelib / "benchlike"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "plugin.py").write_text(BENCH_PLUGIN)
    (pkg / "session.py").write_text(BENCH_SESSION)
    return python


def run(tmp_path: Path, python: Path, extra: dict[str, str] | None = None, plugins=()):
    root = write_tree(tmp_path / "proj", {**FILES, **(extra or {})})
    return run_suite([str(python), "-m", "pytest"], root, tmp_path / "ev", "suite",
                     pythonpath=[root / "src"], own_files=[TEST], canaries=[TEST],
                     plugins=list(plugins))


def test_a_plugin_an_installed_distribution_registers_late_is_not_forged(tmp_path,
                                                                         bench_python):
    r = run(tmp_path, bench_python, plugins=["benchlike.plugin"])
    assert r.integrity.channel == "used" and r.forged == [], r.forged
    assert r.results["tests.test_calc::test_mul"].outcome == "passed"


def test_the_installed_plugins_class_changed_by_a_test_module_is_forged(tmp_path,
                                                                        bench_python):
    # the same late registration, but a test module gave the class a hook first
    evil = '''
    from benchlike.session import BenchSession


    def _flip(self, item, call):
        call.excinfo = None


    BenchSession.pytest_runtest_makereport = _flip


    def test_aaa():
        assert True
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil}, plugins=["benchlike.plugin"])
    assert any("benchlike" in f for f in r.forged), r.forged


def test_an_installed_class_given_a_getattribute_by_a_test_module_is_forged(tmp_path,
                                                                           bench_python):
    # pluggy reads hooks with getattr: a __getattribute__ could hand it any function
    evil = '''
    from benchlike.session import BenchSession


    def _get(self, name, _real=object.__getattribute__):
        return _real(self, name)


    BenchSession.__getattribute__ = _get


    def test_aaa():
        assert True
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil}, plugins=["benchlike.plugin"])
    assert any("plugin registered: benchlike-session" in f for f in r.forged), r.forged


def test_an_instance_of_the_installed_class_with_its_own_hook_is_forged(tmp_path,
                                                                        bench_python):
    evil = '''
    from benchlike.session import BenchSession


    def test_register(request):
        s = BenchSession(request.config)
        s.pytest_runtest_makereport = lambda item, call: None
        request.config.pluginmanager.register(s, "mine")
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil}, plugins=["benchlike.plugin"])
    assert any("plugin registered: mine" in f for f in r.forged), r.forged


@pytest.mark.parametrize("when", ["import", "test"])
def test_swapping_the_code_of_an_installed_plugins_hook_is_forged(tmp_path, bench_python, when):
    # at import: before the harness looked at the late plugin; in a test: after it accepted it
    swap = "session.BenchSession.pytest_runtest_logreport.__code__ = _other.__code__"
    evil = f'''
    from benchlike import session


    def _other(self, report):
        pass


    {swap if when == "import" else ""}


    def test_aaa():
        {swap if when == "test" else "pass"}
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil}, plugins=["benchlike.plugin"])
    assert any("benchlike" in f for f in r.forged), r.forged


def test_a_test_returning_a_value_is_not_forged(tmp_path, bench_python):
    # pytest warns (PytestReturnNotNoneWarning) with warnings.warn in _pytest.python, which
    # leaves a __warningregistry__ in that module: pytest's doing, not a patch
    r = run(tmp_path, bench_python, {"tests/test_ret.py": "def test_ret():\n    return 5\n"})
    assert r.integrity.channel == "used" and r.forged == [], r.forged
    assert r.results["tests.test_ret::test_ret"].outcome == "passed"


@pytest.mark.parametrize("value", ["{'version': 1, 'x': True}",
                                   "{('m', UserWarning, 1): len}",
                                   "{('m', int, 1): True}",
                                   "type('D', (dict,), {})(version=1)"])
def test_a_warning_registry_of_another_shape_is_forged(tmp_path, bench_python, value):
    evil = f'''
    import _pytest.python


    _pytest.python.__warningregistry__ = {value}


    def test_aaa():
        assert True
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil})
    assert any("_pytest.python.__warningregistry__ added" in f for f in r.forged), r.forged


def test_a_class_that_only_claims_to_be_pytests_is_forged(tmp_path, bench_python):
    evil = '''
    class P:
        def pytest_runtest_makereport(self, item, call):
            call.excinfo = None


    P.__module__ = "_pytest.legacypath"


    def test_register(request):
        request.config.pluginmanager.register(P(), "claims")
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil})
    assert any("plugin registered: claims" in f for f in r.forged), r.forged


def test_a_module_that_only_claims_to_be_pytests_is_forged(tmp_path, bench_python):
    evil = '''
    import types


    def test_register(request):
        m = types.ModuleType("_pytest.extra")
        m.__file__ = "/nowhere/_pytest/extra.py"
        m.pytest_runtest_logreport = lambda report: None
        request.config.pluginmanager.register(m, "claims")
    '''
    r = run(tmp_path, bench_python, {"tests/test_aaa.py": evil})
    assert any("plugin registered: claims" in f for f in r.forged), r.forged
