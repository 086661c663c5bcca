"""Start-up of every harness pytest run: the verdict channel first, then pytest, then the project.

Run by the harness (never imported by andon) in the *project's* interpreter, Python >= 3.8, stdlib
only::

    <interp> -I -B boot.py <wfd>:<rfd> <m|s> [<path>...] -- <pytest args...>

``-I`` ignores every PYTHON* variable, the user site and the current directory, so nothing in the
tree runs at start-up (a ``sitecustomize.py``/``usercustomize.py`` in a path folder is not on
``sys.path`` yet when ``site`` looks for it). ``-B`` writes no ``__pycache__`` into the tree.

Order, which is the whole point of this file:

1. read the nonce the harness wrote into ``rfd`` (then closed; after a newline, the run's canary
   module, which the plugin gives a cheap failure report), make both fds non-inheritable;
2. install the audit hook (PEP 578: it cannot be removed) writing authenticated lines to ``wfd``;
3. import pytest, pluggy and andon's verdict plugin (by file) while ``sys.path`` holds only the
   interpreter's own folders, so nothing in the tree can stand in for them;
4. only then put the project's folders on ``sys.path``: ``m`` mode (the command was
   ``python -m pytest``) puts the working directory first, as ``-m`` does; then ``<path>...``;
5. run ``pytest.main`` with the plugin, exit with its status.

Line format on ``wfd``: ``<seq> <mac> <kind>\\t<field>...\\n``; ``mac`` is keyed BLAKE2b (key: the
nonce) of ``"<seq> <kind>\\t<field>..."``, so a line the code under test writes into the fd is
detected, and the harness requires exactly one ``end`` line. Kinds: ``boot`` (the pytest and
pluggy versions, before the plugin loads), ``armed``, ``outcome``
(junit id, phase, passed/failed/skipped, code file), ``patched`` (what changed since ``armed`` in
a CRITICAL module or hook), ``changed`` (elsewhere in the runner), ``event``
(an audited event named in WATCH), ``forged-event`` (an audited act that only a forger needs),
``end``. See docs/gates.md, "What the verdict is read from".
"""

import os
import sys

# events recorded once each, after arming, as "event" (a note in the evidence, not a finding)
WATCH = ("sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
         "ctypes.cdata", "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at",
         "ctypes.cdata/buffer", "sys.settrace", "sys.setprofile", "code.__new__",
         "function.__new__")
# attributes of a protected function whose swap is a forgery (audited as object.__setattr__)
FUNC_ATTRS = ("__code__", "__defaults__", "__kwdefaults__")
PREFIXES = ("_pytest", "pytest", "pluggy", "andon_verdict")
# a change in these modules (or their classes, or HOOKS) is a forgery; elsewhere only a note
CRITICAL = ("_pytest.reports", "_pytest.runner", "_pytest.python", "_pytest.junitxml",
            "_pytest.main", "_pytest.outcomes", "_pytest.skipping", "_pytest.fixtures",
            "_pytest.nodes", "_pytest.unittest", "_pytest.capture",
            "pluggy._callers", "pluggy._hooks", "pluggy._manager", "andon_verdict",
            # pluggy 1.6+ moved the call loop and HookCaller here (_callers/_hooks re-export)
            "pluggy._execution", "pluggy._caller", "pluggy._impl", "pluggy._result")
# checked after every test (with the hooks a report goes through and the plugin table): the
# functions on the path from a test to its report; everything is checked after collection and
# at the end
EVERY_TEST = ("_pytest.reports:TestReport.from_item_and_call",
              "_pytest.reports:TestReport.__init__",
              "_pytest.runner:CallInfo.from_call", "_pytest.runner:call_and_report",
              "_pytest.runner:call_runtest_hook", "_pytest.runner:runtestprotocol",
              "_pytest.runner:check_interactive_exception", "_pytest.python:pytest_pyfunc_call",
              "_pytest.python:Function.runtest", "_pytest.outcomes:fail", "_pytest.outcomes:skip",
              "pluggy._callers:_multicall", "pluggy._hooks:HookCaller.__call__",
              "andon_verdict:pytest_runtest_makereport", "andon_verdict:_junit_id",
              "andon_verdict:_outcome", "pluggy._execution:_multicall",
              "pluggy._caller:HookCaller.__call__")
HOOKS = ("pytest_runtest_protocol", "pytest_runtest_setup", "pytest_runtest_call",
         "pytest_runtest_teardown", "pytest_runtest_makereport", "pytest_runtest_logreport",
         "pytest_report_teststatus", "pytest_pyfunc_call", "pytest_collection_modifyitems",
         "pytest_collectreport", "pytest_make_collect_report", "pytest_collection",
         "pytest_itemcollected", "pytest_deselected", "pytest_runtestloop",
         "pytest_sessionfinish", "pytest_terminal_summary", "pytest_unconfigure")


def _load(util, name, path, preset=None):
    spec = util.spec_from_file_location(name, path)
    module = util.module_from_spec(spec)
    module.__dict__.update(preset or {})
    spec.loader.exec_module(module)
    return module


def _pluggy_version(pluggy):
    """Without ``pluggy.__version__``: from pluggy 1.6 on that reads the distribution's metadata
    (importlib.metadata and the email parser, ~10-20 ms of every run). The ``dist-info`` folder
    beside the package names the version; "?" when there is none."""
    v = getattr(getattr(pluggy, "_version", None), "version", None)
    if isinstance(v, str):
        return v
    site = os.path.dirname(os.path.dirname(os.path.abspath(pluggy.__file__)))
    try:
        names = os.listdir(site)
    except OSError:
        return "?"
    for n in names:
        if n.startswith("pluggy-") and n.endswith(".dist-info"):
            return n[len("pluggy-"):-len(".dist-info")]
    return "?"


def _site_dirs():
    """Where installed distributions live (site-packages of this interpreter or its venv),
    read before any project folder is on ``sys.path``: a plugin an installed distribution
    registers late is the environment's (plugins.py); envprint.py fingerprints these folders
    around every agent stage."""
    import site
    import sysconfig

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    paths = sysconfig.get_paths()
    dirs += [paths.get("purelib") or "", paths.get("platlib") or ""]
    found = []
    for d in dirs:
        if isinstance(d, str) and d:
            for v in (os.path.abspath(d), os.path.realpath(d)):
                if v not in found:
                    found.append(v)
    return found


def _main(argv):
    fds, mode = argv[0].split(":"), argv[1]
    wfd, rfd = int(fds[0]), int(fds[1])
    cut = argv.index("--")
    paths, args = argv[2:cut], argv[cut + 1:]
    os.set_inheritable(wfd, False)
    os.set_inheritable(rfd, False)
    chunks = []
    while True:
        b = os.read(rfd, 256)
        if not b:
            break
        chunks.append(b)
    os.close(rfd)
    # "<nonce>[\n<canary module>]": the canary's path stays off the command line
    nonce, _, canary = b"".join(chunks).partition(b"\n")
    if len(nonce) < 16 or not hasattr(sys, "addaudithook"):
        sys.stderr.write("andon boot: no nonce or no audit hooks (Python >= 3.8 needed)\n")
        return 3
    import importlib.util
    from hashlib import blake2b  # before any project code; bound into the hook

    here = os.path.dirname(os.path.abspath(__file__))
    # the hook's body lives beside this file; loaded by path, never entered in sys.modules
    hook_module = _load(importlib.util, "_andon_hook", os.path.join(here, "hook.py"))
    plugins = _load(importlib.util, "_andon_plugins", os.path.join(here, "plugins.py"))
    hook_module.install(wfd, nonce, blake2b, WATCH, FUNC_ATTRS, PREFIXES, CRITICAL,
                        EVERY_TEST, HOOKS, plugins.make(_site_dirs(), os.getcwd()))
    del nonce, chunks, hook_module, plugins

    import pluggy
    import pytest

    # before any project code: which runner this is, so that a run whose plugin never armed
    # the hook (a pytest too old for its events) is told apart from a channel cut short
    sys.audit("andon.boot", "pytest " + str(getattr(pytest, "__version__", "?")) + ", pluggy "
              + _pluggy_version(pluggy))
    plugin = _load(importlib.util, "andon_verdict",
                   os.path.join(os.path.dirname(here), "pytest_plugins", "andon_verdict.py"),
                   {"_CANARY": canary.decode("utf-8", "replace")})
    sys.modules["andon_verdict"] = plugin

    front = [os.getcwd()] if mode == "m" else []
    sys.path[0:0] = front + [os.path.abspath(p) for p in paths]
    main_file = os.path.join(os.path.dirname(pytest.__file__), "__main__.py")
    sys.argv = [main_file if mode == "m" else "pytest", *args]
    if tuple(int(x) for x in pytest.__version__.split(".")[:2] if x.isdigit()) >= (8, 4):
        args = ["--disable-plugin-autoload", *args]
    else:  # older pytest reads only the variable; the plugin removes it before any conftest
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return pytest.main(args, plugins=[plugin])


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
