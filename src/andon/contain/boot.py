"""Start-up of every harness pytest run: the verdict channel first, then pytest, then the project.

Run by the harness (never imported by andon) in the *project's* interpreter, Python >= 3.8, stdlib
only::

    <interp> -I -B boot.py <wfd>:<rfd> <m|s> [<path>...] -- <pytest args...>
    <interp> -I -B boot.py serve <fd>          (the fork server: zygote.py, forkserver.py)

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

A fork server (``serve``) does what comes before step 1 that needs no nonce — boot's own
imports, the hook's and plugin checker's modules, pytest and pluggy — once, and each run is a
fork of it that starts at step 1 (zygote.py says what the child makes equal to a fresh start).

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


def _prepare():
    """What every run imports before the nonce matters: boot's own modules and the bodies of
    the hook and the plugin checker (loaded by path, never entered in sys.modules)."""
    import importlib.util
    from hashlib import blake2b  # before any project code; bound into the hook

    here = os.path.dirname(os.path.abspath(__file__))
    # the hook's body lives beside this file; loaded by path, never entered in sys.modules
    hook_module = _load(importlib.util, "_andon_hook", os.path.join(here, "hook.py"))
    plugins = _load(importlib.util, "_andon_plugins", os.path.join(here, "plugins.py"))
    return importlib.util, blake2b, hook_module, plugins


def _main(argv, prepared=None):
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
    util, blake2b, hook_module, plugins = prepared or _prepare()
    here = os.path.dirname(os.path.abspath(__file__))
    hook_module.install(wfd, nonce, blake2b, WATCH, FUNC_ATTRS, PREFIXES, CRITICAL,
                        EVERY_TEST, HOOKS, plugins.make(_site_dirs(), os.getcwd()))
    del nonce, chunks, hook_module, plugins, prepared

    import pluggy
    import pytest

    # before any project code: which runner this is, so that a run whose plugin never armed
    # the hook (a pytest too old for its events) is told apart from a channel cut short
    sys.audit("andon.boot", "pytest " + str(getattr(pytest, "__version__", "?")) + ", pluggy "
              + _pluggy_version(pluggy))
    plugin = _load(util, "andon_verdict",
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


def _serve(fd, blocked):
    """The fork server: everything a run imports before its nonce, in a fresh run's order,
    and pytest's default plugins but ``blocked`` (pytest imports every one it does not block
    before any project code), then zygote.serve; returns (in a forked child only) what
    ``_main`` runs with."""
    prepared = _prepare()
    _site_dirs()
    import pluggy  # noqa: F401 - imported once here, for every child
    import pytest  # noqa: F401

    for name in getattr(sys.modules.get("_pytest.config"), "default_plugins", ()):
        if name not in blocked:
            try:
                __import__("_pytest." + name)
            except Exception:  # noqa: BLE001 - the run imports it again, and says why
                pass
    # what a fresh run has at this point: what the server adds after it is taken out of each
    # child (no cache of a pure function warmed here either: a run could read the cache)
    before = (set(sys.modules), set(sys.path_importer_cache))
    here = os.path.dirname(os.path.abspath(__file__))
    zygote = _load(prepared[0], "_andon_zygote", os.path.join(here, "zygote.py"))
    # andon's own files a run loads (by path, so not among sys.modules' files): a server
    # older than one of them is stale like one older than pytest
    own = [os.path.join(here, f) for f in ("boot.py", "hook.py", "plugins.py", "zygote.py",
                                             "netless.py")]
    own.append(os.path.join(os.path.dirname(here), "pytest_plugins", "andon_verdict.py"))
    argv = zygote.serve(fd, before, own)
    return argv, prepared


def _end_forked(argv, prepared):
    """Run a forked child and end it as Python ends a process, up to the point where it starts
    freeing every object (non-daemon threads joined, ``atexit`` handlers, standard streams
    flushed), then ``os._exit`` — as multiprocessing's forked children end. Freeing a heap the
    child shares with its server copies every page of it (half the CPU of a small run); what
    it would free cannot change the report, which is written and sent before."""
    try:
        code = _main(argv, prepared)
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:  # noqa: BLE001 - printed and exit status 1, as Python does
        import traceback

        traceback.print_exc()
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(str(code) + "\n")
        code = 1
    threading = sys.modules.get("threading")
    try:
        getattr(threading, "_shutdown", lambda: None)()
    finally:
        import atexit

        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed or broken stream: as at exit
                pass
        os._exit(int(code) & 0xFF)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:  # returns only in a forked child
        _end_forked(*_serve(int(sys.argv[2]), set(sys.argv[3].split(",")) - {""}))
    sys.exit(_main(sys.argv[1:]))
