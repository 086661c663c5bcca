"""Which changes after arming are the environment's own doing (loaded by boot.py by path, Python
>= 3.8, stdlib only; the hook in hook.py calls these).

``make(site_dirs, root)`` returns four functions, every name they use bound as a default
argument before any project code runs (see hook.py for why):

``arm(funcs)``
    at ``andon.arm``: where pytest and pluggy live (their package folders), and the hook's map
    of protected functions (``id`` → (name, function)) that accepted plugins' hooks join, so
    that a later ``__code__`` swap on one of them is a forgery.
``late_ok(plugin) -> bool``
    a plugin registered after arming is fine when the code that defines it is not the code
    under test's and it is what that code made: a conftest module, or a module of the
    project's tree that is not a test module (the ``scope`` and ``patterns`` gates own those);
    a module of pytest or pluggy, or of an installed distribution (under one of
    ``site_dirs``: pytest-benchmark registers its session object in ``pytest_configure``);
    an object of a class such a module defines, or such a class itself. "Defines" is checked,
    not claimed: the class must be the one its module binds under its ``__qualname__``, its
    ``pytest_*`` functions (and any ``__getattr__``, ``__getattribute__`` or ``__dir__``, which
    could make more) must be code compiled from that module's file (a test module's function
    put on the class, or swapped in as ``__code__``, is not), and an object has no
    ``pytest_*`` of its own. What a run can make up — a module object, its ``__file__``,
    ``co_filename`` (``compile(src, path, …)``, ``code.replace``) — is checked against the
    disk: a function that was not there at arming must be what its file compiles to, and
    that file older than the run (its inode's change time), so a module a test writes into
    the tree, or a class it binds into another module, does not pass.
``describe(plugin) -> str``
    "module <file>" or "object of <module>.<qualname>", for the evidence line.
``own_hook(plugin, function) -> bool``
    the function pluggy captured when the plugin was registered (``HookImpl.function``) is
    the plugin's own: found, by identity, under a ``pytest_*`` name in the module's namespace
    or its class's (and bases'), bound to the plugin itself where it is a method. An object
    given a hook of its own and stripped of it again before the check, an object whose
    ``__class__`` was changed after registering, or a ``HookImpl`` made by hand for an
    accepted plugin with another function, are not.
``registry_ok(value) -> bool``
    an added ``__warningregistry__`` on a runner module is the one ``warnings.warn`` keeps
    (CPython's ``warnings`` module, ``_warnings.c``): a ``dict`` holding ``"version"`` →
    ``int`` and ``(message, Warning subclass, line)`` → ``True``, exact types only (pytest
    warns so from ``_pytest.python`` when a test returns a value).
"""

import ast
import os
import sys
import time
import types


def make(site_dirs, root):
    """The five functions above and a tuple of what they keep (for the hook's guard: a read of
    their attributes is a forgery); ``site_dirs``: folders (str, absolute) of installed
    distributions, ``root``: the run's working directory."""
    places: dict = {"pytest": (), "funcs": None, "rewrite": None}
    site = tuple(os.path.join(d, "") for d in site_dirs)
    root_dir = os.path.join(root, "")
    data = (str, list, tuple, dict, set, frozenset, int, float, bool, bytes, type(None), type,
            types.ModuleType)

    def arm(funcs, _modules=sys.modules, _places=places, _type=type, _str=str,
            _mdict=types.ModuleType.__dict__["__dict__"].__get__, _Mod=types.ModuleType,
            _dirname=os.path.dirname, _join=os.path.join):
        dirs = {}
        for name in ("_pytest", "pluggy"):
            m = dict.get(_modules, name)
            f = _mdict(m).get("__file__") if _type(m) is _Mod else None
            if _type(f) is _str:
                dirs[name] = _join(_dirname(f), "")
        _places["pytest"] = dirs
        _places["funcs"] = funcs
        # pytest rewrites the asserts of conftests and of plugins it imports: their code is
        # that rewriter's output (bound now, before any project code can replace it)
        rw = dict.get(_modules, "_pytest.assertion.rewrite")
        _places["rewrite"] = _mdict(rw).get("rewrite_asserts") if _type(rw) is _Mod else None

    def _place_ok(module, _type=type, _str=str, _sw=str.startswith, _ew=str.endswith,
                  _rfind=str.rfind, _part=str.partition, _repl=str.replace,
                  _mdict=types.ModuleType.__dict__["__dict__"].__get__,
                  _Mod=types.ModuleType, _modules=sys.modules, _places=places, _site=site,
                  _root=root_dir):
        """The file of ``module`` when it is one that may define a late plugin, else None."""
        if _type(module) is not _Mod:
            return None
        d = _mdict(module)
        name, f = d.get("__name__"), d.get("__file__")
        if _type(name) is not _str or _type(f) is not _str or dict.get(_modules, name) \
                is not module:
            return None
        top, _, rest = _part(name, ".")
        if top in ("_pytest", "pluggy"):
            # named as pytest's own: a file of pytest's packages, at its name's place
            where = dict.get(_places["pytest"], top)
            rel = _repl(rest, ".", "/")
            ok = _type(where) is _str and rest and f in (where + rel + ".py",
                                                         where + rel + "/__init__.py")
            return f if ok else None
        if _sw(f, _site):
            return f
        base = f[_rfind(f, "/") + 1:]
        if base == "conftest.py" or (_sw(f, _root) and _ew(f, ".py") and not _sw(base, "test_")
                                     and not _ew(base, "_test.py")):
            return f
        return None

    compiled: dict = {}  # path -> the code objects its source compiles to (None: unusable)
    prims = (int, str, bytes, float, bool, complex, type(None), type(...))

    def _same_code(a, b, _type=type, _Code=types.CodeType, _len=len, _tuple=tuple,
                   _frozenset=frozenset, _prims=prims, _zip=zip, _sorted=sorted, _repr=repr):
        """Two code objects alike in bytecode, names and constants: compared by exact types
        only, so no constant a forger made runs its own ``__eq__``."""
        if _type(a) is not _Code or _type(b) is not _Code:
            return False
        if (a.co_name, a.co_firstlineno, a.co_argcount, a.co_flags) != (
                b.co_name, b.co_firstlineno, b.co_argcount, b.co_flags) \
                or a.co_code != b.co_code or a.co_names != b.co_names \
                or a.co_varnames != b.co_varnames or a.co_freevars != b.co_freevars:
            return False
        stack = [(a.co_consts, b.co_consts)]
        while stack:
            x, y = stack.pop()
            if _type(x) is not _type(y):
                return False
            if _type(x) is _Code:
                if not _same_code(x, y):
                    return False
            elif _type(x) is _tuple:
                if _len(x) != _len(y):
                    return False
                stack.extend(_zip(x, y))
            elif _type(x) is _frozenset:
                stack.append((_tuple(_sorted(x, key=_repr)), _tuple(_sorted(y, key=_repr))))
            elif _type(x) not in _prims or _repr(x) != _repr(y):
                return False
        return True

    def _genuine(code, path, _st=os.stat, _open=open, _compile=compile, _type=type,
                 _Code=types.CodeType, _start=time.time(), _compiled=compiled,  # noqa: B008
                 _same=_same_code, _miss=object(), _places=places,  # noqa: B008 - at start
                 _parse=ast.parse):
        """``code`` is what the file at ``path`` compiles to (as it is, or with pytest's
        assertion rewriting, as pytest imports conftests and plugins), and the file was there before
        this run started (its inode's change time: a file the run wrote, or back-dated, is
        newer). A module object, ``__file__`` and ``co_filename`` are all the code under
        test's to make up; the file on disk from before the run is not."""
        codes = dict.get(_compiled, path, _miss)
        if codes is _miss:
            codes = None
            try:
                if _st(path).st_ctime < _start:
                    with _open(path, "rb") as fh:
                        src = fh.read()
                    stack = [_compile(src, path, "exec", dont_inherit=True)]
                    rewrite = _places["rewrite"]
                    if rewrite is not None and b"assert" in src:
                        tree = _parse(src, filename=path)
                        rewrite(tree, src, path, None)
                        stack.append(_compile(tree, path, "exec", dont_inherit=True))
                    codes = []
                    while stack:
                        c = stack.pop()
                        codes.append(c)
                        stack.extend(k for k in c.co_consts if _type(k) is _Code)
            except Exception:  # noqa: BLE001 - unreadable, or the rewriter failed: not genuine
                codes = None
            _compiled[path] = codes
        for c in codes or ():  # noqa: SIM110 - a loop: a generator's frame would hold these
            if c.co_firstlineno == code.co_firstlineno and _same(c, code):
                return True
        return False

    def _hooks_from(d, f, keys, _type=type, _str=str, _sw=str.startswith, _Func=types.FunctionType,
                    _sm=staticmethod, _cm=classmethod, _places=places, _site=site,
                    _data=data, _made=("__getattr__", "__getattribute__", "__dir__"),
                    _genuine=_genuine,
                    _code=types.FunctionType.__dict__["__code__"].__get__,
                    _fname=types.CodeType.__dict__["co_filename"].__get__):
        """Every ``pytest_*`` (and ``__getattr__``/``__dir__``, which could make more) in
        mapping ``d`` that pluggy could call is a function compiled from file ``f`` (or, when
        ``f`` is an installed module's, from any installed module's; when ``f`` is None: there
        are none); data, modules and classes pluggy skips. The accepted
        functions join the protected ones."""
        found, funcs = [], _places["funcs"]
        for k in keys(d):
            if _type(k) is _str and (_sw(k, "pytest_") or k in _made):
                v = d[k]
                if _type(v) in (_sm, _cm):
                    v = v.__func__
                if _type(v) in _data:  # pytest_plugins = [...]: not a hook, pluggy skips it
                    continue
                if f is None or _type(v) is not _Func:
                    return False
                cf = _fname(_code(v))
                # an installed plugin's hook may be wrapped by another installed module
                if cf != f and not (_sw(f, _site) and _type(cf) is _str and _sw(cf, _site)):
                    return False
                known = dict.get(funcs, id(v)) if funcs is not None else None
                if (known is None or known[1] is not v) and not _genuine(_code(v), cf):
                    return False  # not there at arming, and not the file's code either
                found.append((k, v))
        if funcs is not None:
            for k, v in found:
                funcs[id(v)] = (f + ":" + k, v)
        return True

    def late_ok(plugin, _type=type, _str=str, _isinst=isinstance, _modules=sys.modules,
                _mdict=types.ModuleType.__dict__["__dict__"].__get__,
                _tdict=type.__dict__["__dict__"].__get__,
                _mro=type.__dict__["__mro__"].__get__,
                _qual=type.__dict__["__qualname__"].__get__, _Mod=types.ModuleType,
                _oga=object.__getattribute__, _sw=str.startswith, _split=str.split,
                _place_ok=_place_ok, _hooks_from=_hooks_from,
                _pkeys=types.MappingProxyType.keys):
        if _type(plugin) is _Mod:
            f = _place_ok(plugin)
            return f is not None and _hooks_from(_mdict(plugin), f, dict.keys)
        if _isinst(plugin, type) and _type(plugin) is not type:
            return False  # a metaclass could make attributes
        cls = plugin if _isinst(plugin, type) else _type(plugin)
        cm = _tdict(cls).get("__module__")
        module = dict.get(_modules, cm) if _type(cm) is _str else None
        if _place_ok(module) is None:
            return False
        at = module
        for part in _split(_qual(cls), "."):  # the class its module binds under its name
            d = _mdict(at) if _type(at) is _Mod else _tdict(at) if _isinst(at, type) else {}
            at = d.get(part)
        if at is not cls:
            return False
        for c in _mro(cls):  # a base without hooks may live anywhere (abc.ABC)
            if c is not object and not _hooks_from(
                    _tdict(c), _place_ok(dict.get(_modules, _tdict(c).get("__module__"))),
                    _pkeys):
                return False
        if cls is plugin:
            return True
        try:
            own = _oga(plugin, "__dict__")
        except AttributeError:  # __slots__: no attributes of its own
            return True
        if _type(own) is not dict:
            return False
        for k in own:  # noqa: SIM110 - a loop: a generator's frame would hold these names
            if _type(k) is not _str or _sw(k, "pytest_"):
                return False
        return True

    def own_hook(plugin, fn, _type=type, _isinst=isinstance, _Mod=types.ModuleType,
                 _Method=types.MethodType, _Func=types.FunctionType, _sm=staticmethod,
                 _cm=classmethod, _self=types.MethodType.__dict__["__self__"].__get__,
                 _func=types.MethodType.__dict__["__func__"].__get__,
                 _mdict=types.ModuleType.__dict__["__dict__"].__get__,
                 _tdict=type.__dict__["__dict__"].__get__,
                 _mro=type.__dict__["__mro__"].__get__, _sw=str.startswith, _str=str,
                 _pitems=types.MappingProxyType.items):
        if _type(fn) is _Method:
            # bound to the plugin, or (a classmethod of an object's class) to its class
            if _self(fn) is not plugin and (_isinst(plugin, type)
                                            or _self(fn) is not _type(plugin)):
                return False
            fn = _func(fn)
        if _type(fn) is not _Func:
            return False
        if _type(plugin) is _Mod:
            spaces = [dict.items(_mdict(plugin))]
        else:
            cls = plugin if _isinst(plugin, type) else _type(plugin)
            spaces = [_pitems(_tdict(c)) for c in _mro(cls)]
        for items in spaces:
            for k, v in items:
                if _type(v) in (_sm, _cm):
                    v = v.__func__
                if v is fn and _type(k) is _str and _sw(k, "pytest_"):
                    return True
        return False

    def describe(plugin, _type=type, _str=str, _mdict=types.ModuleType.__dict__["__dict__"]
                 .__get__, _tdict=type.__dict__["__dict__"].__get__, _Mod=types.ModuleType,
                 _qual=type.__dict__["__qualname__"].__get__):
        if _type(plugin) is _Mod:
            f = _mdict(plugin).get("__file__")
            return "module " + (f if _type(f) is _str else "?")
        t = plugin if isinstance(plugin, type) else _type(plugin)
        cm, qn = _tdict(t).get("__module__"), _qual(t)
        return ("class " if t is plugin else "object of ") + (
            cm if _type(cm) is _str else "?") + "." + (qn if _type(qn) is _str else "?")

    def registry_ok(value, _type=type, _str=str, _int=int, _tuple=tuple, _len=len,
                    _mro=type.__dict__["__mro__"].__get__, _W=Warning):
        if _type(value) is not dict:
            return False
        for k, v in dict.items(value):
            if k == "version" and _type(k) is _str:
                if _type(v) is not _int:
                    return False
            elif not (_type(k) is _tuple and _len(k) == 3 and v is True
                      and _type(k[0]) is _str and _type(k[2]) is _int
                      and _type(k[1]) is type and _W in _mro(k[1])):
                return False
        return True

    return arm, late_ok, describe, registry_ok, own_hook, (places, compiled, _place_ok, _hooks_from,
                                                      _same_code, _genuine)
