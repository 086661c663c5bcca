"""The audit hook of the verdict channel (loaded by boot.py by path; Python >= 3.8, stdlib only).

``install`` adds one PEP 578 audit hook. Everything the hook uses is bound as a default argument
when it is made, before any project code runs: a module global or a closure cell can be rebound
without an audit event, a default cannot be read or swapped without one (``object.__getattr__`` /
``object.__setattr__``, which the hook itself reports). The hook calls no method of an object the
code under test could have made: it checks exact types by identity and calls the unbound methods
of ``str``/``dict``/``list`` it bound at start.

Events it answers (raised by andon's pytest plugin, andon_verdict.py)::

    andon.boot (versions)       raised by boot.py before the plugin loads: a ``boot`` line
    andon.arm (pluginmanager)   snapshot: protected modules' dicts, their classes' dicts, the
                                registered plugins, the implementations of HOOKS
    andon.check (full: bool)    compare with the snapshot (the EVERY_TEST functions, new
                                plugins and the report's hooks; everything when full)
    andon.outcome (id, when, outcome, node_file, code_file)   one line per test phase
    andon.note (text)           a line in the evidence (e.g. "xdist")
    andon.end ()                full check, then the ``end`` line

After arming it also reports WATCH events once each, a swap of ``__code__``/``__defaults__`` on a
protected function, and any read of the hook's own attributes.
"""

import operator
import os
import sys
import types


def install(wfd, nonce, blake2b, watch, func_attrs, prefixes, critical, every_test, hooks,
            plugins):
    """Add the hook; it writes authenticated lines to ``wfd`` (see boot.py for the format).
    ``plugins``: what plugins.make returned (which late changes are the environment's)."""
    _arm_plugins, _late_ok, _describe, _registry_ok, _own_hook, _kept = plugins
    state: dict = {"armed": False, "seq": 0, "said": set(), "snap": None, "ok_ids": set(),
             "ok_keep": [], "n2p_len": -1, "buf": [], "buf_n": 0, "seen_impls": {}}
    miss = object()

    def _say(kind, fields, wfd=wfd, _st=state, _w=os.write, _mac=blake2b, _key=bytes(nonce),
             _enc=str.encode, _join=str.join, _repl=str.replace, _str=str, _type=type):
        clean = [_repl(_repl(f, "\n", " "), "\t", " ")[:1500] for f in fields
                 if _type(f) is _str]
        _st["seq"] += 1
        seq = _str(_st["seq"])
        body = _join("\t", [kind, *clean])
        mac = _mac(_enc(seq + " " + body, "utf-8", "replace"), key=_key,
                   digest_size=16).hexdigest()
        line = _enc(seq + " " + mac + " " + body + "\n", "utf-8", "replace")[:4000]
        # Outcome lines are batched (one write wakes the harness per ~4 KB, not per test: the
        # per-test cost of the channel); every other line goes out at once with what is
        # buffered, so "armed", "patched", "forged-event" and "end" are never held back. Lines
        # lost in a buffer when the process dies leave no "end" line: the channel is lost.
        _st["buf"].append(line)
        _st["buf_n"] += len(line)
        if kind == "outcome" and _st["buf_n"] < 3500:
            return
        data, _st["buf"], _st["buf_n"] = b"".join(_st["buf"]), [], 0
        try:
            _w(wfd, data)
        except OSError:
            pass

    def _attr_event(event, args, _st=state, _len=len, _type=type, _str=str, _id=id, _say=_say,
                    func_attrs=frozenset(func_attrs)):
        if _len(args) < 2 or _type(args[1]) is not _str:
            return
        obj, name = args[0], args[1]
        snap = _st["snap"]
        # compared in C (no generator frame): pytest reads ``__code__``/``tb_frame`` several
        # times per test, and each read is one of these events
        if _id(obj) in _st["guard"]:
            _say("forged-event", ("the verdict hook's " + name + " was read or set",))
        elif event == "object.__setattr__" and name in func_attrs:
            where = snap["funcs"].get(_id(obj)) if snap else None
            if where is not None and where[1] is obj:
                _say("forged-event", (name + " of " + where[0] + " was replaced",))
            elif ("setattr " + name) not in _st["said"]:
                _st["said"].add("setattr " + name)
                _say("event", ("object.__setattr__ " + name + " on a function",))

    def _snapshot(pm, prefixes=tuple(prefixes), critical=frozenset(critical),
                  every=tuple(every_test), hooks=tuple(hooks), _type=type, _str=str,
                  _sw=str.startswith, _isinst=isinstance,
                  _tdict=type.__dict__["__dict__"].__get__,
                  _mdict=types.ModuleType.__dict__["__dict__"].__get__,
                  _oga=object.__getattribute__, _Mod=types.ModuleType, _Func=types.FunctionType):
        mods, classes, funcs, seen = [], [], {}, set()
        for name, m in list(sys.modules.items()):
            if _type(name) is not _str or _type(m) is not _Mod or not _sw(name, prefixes):
                continue
            d = _mdict(m)
            copy = dict(d)
            mods.append((name, d, copy, name in critical))
            for k, v in copy.items():
                if _type(v) is _Func:
                    funcs[id(v)] = (name + "." + k, v)
                elif _isinst(v, type) and id(v) not in seen:
                    seen.add(id(v))
                    cd = _tdict(v)
                    cm = cd.get("__module__")
                    if _type(cm) is _str and _sw(cm, prefixes):
                        qual = cm + "." + _str(cd.get("__qualname__", k))
                        ccopy = dict(cd)
                        classes.append((qual, v, ccopy, cm in critical))
                        for ck, cv in ccopy.items():
                            f = cv.__func__ if _type(cv) in (staticmethod, classmethod) else cv
                            if _type(f) is _Func:
                                funcs[id(f)] = (qual + "." + ck, f)
        n2p = _oga(pm, "_name2plugin")
        relay = _oga(_oga(pm, "hook"), "__dict__")
        by_name = {m[0]: m for m in mods}
        by_class = {c[0]: c for c in classes}
        path: list = []  # (what, live dict or mappingproxy, key, object, its get): per test
        for spec in every:
            mod, _, attr = spec.partition(":")
            owner, _, key = attr.rpartition(".")
            if mod not in by_name:
                continue
            if owner:
                c = by_class.get(mod + "." + owner)
                if c is None or key not in c[2]:
                    continue
                path.append((spec, _tdict(c[1]), key, c[2][key], types.MappingProxyType.get))
            elif key in by_name[mod][2]:
                path.append((spec, by_name[mod][1], key, by_name[mod][2][key], dict.get))
        hooks_now = []
        for h in hooks:
            hc = relay.get(h)
            if hc is None:
                continue
            impls = _oga(hc, "_hookimpls")
            hooks_now.append((h, hc, impls, [(i, _oga(i, "function")) for i in impls]))
            state["seen_impls"][h] = list(impls)
            for i in impls:
                state["ok_ids"].add(id(i))
        per_test = frozenset(("pytest_runtest_makereport", "pytest_runtest_call",
                              "pytest_pyfunc_call", "pytest_runtest_logreport",
                              "pytest_runtest_protocol"))
        cfg = by_name.get("_pytest.config")
        config_class = cfg[2].get("Config") if cfg is not None else None
        # the same path as three parallel tuples per kind of mapping, compared in C after
        # each test (``path`` says what changed when they differ)
        fast = [tuple(tuple(x[i] for x in path if x[4] is g) for i in (1, 2, 3))
                for g in (dict.get, types.MappingProxyType.get)]
        return {"mods": mods, "classes": classes, "funcs": funcs, "pm": pm, "n2p": n2p,
                "path_fast": fast,
                "config_class": config_class if _isinst(config_class, type) else None,
                "path": path,
                "n2p_copy": dict(n2p), "hooks": hooks_now, "relay": relay,
                # the hooks a test's report goes through: checked after each test
                "every_hooks": [x for x in hooks_now if x[0] in per_test]}

    def _expected(qual, key, now, _st=state, _type=type, _oga=object.__getattribute__,
                  _dict=dict):
        """pytest's own debugging plugin, at configure: ``pytestPDB._pluginmanager`` becomes
        the armed plugin manager and ``pytestPDB._config`` the Config that owns it (undone at
        unconfigure). Only exactly those values are expected; anything else stays a change."""
        if qual != "_pytest.debugging.pytestPDB":
            return False
        pm = _st["snap"]["pm"]
        if key == "_pluginmanager":
            return now is pm
        if key == "_config":
            cfg = _st["snap"]["config_class"]
            return cfg is not None and _type(now) is cfg \
                and _dict.get(_oga(now, "__dict__"), "pluginmanager") is pm
        return False

    def _compare(full, _st=state, _type=type, _str=str, _Mod=types.ModuleType,
                 _tdict=type.__dict__["__dict__"].__get__, _oga=object.__getattribute__,
                 _miss=miss, _len=len, _say=_say, _late_ok=_late_ok, _describe=_describe,
                 _expected=_expected, _registry_ok=_registry_ok, _own_hook=_own_hook,
                 _sw=str.startswith, _id=id, _all=all, _map=map, _is=operator.is_,
                 _pget=types.MappingProxyType.get):
        """Report what changed since the snapshot: everything when ``full``, else the
        EVERY_TEST functions, new plugins and the hooks a test's report goes through."""
        snap = _st["snap"]
        ok_ids = _st["ok_ids"]
        found = []
        (md, mk, mo), (cd, ck, co) = snap["path_fast"]
        if not full and not (_all(_map(_is, _map(dict.get, md, mk), mo))
                             and _all(_map(_is, _map(_pget, cd, ck), co))):
            for spec, live, key, obj, get in snap["path"]:
                if get(live, key, _miss) is not obj:
                    found.append((spec.replace(":", ".") + " replaced", True))
        for name, d, copy, crit in snap["mods"] if full else ():
            for k, v in copy.items():
                now = dict.get(d, k, _miss)
                if now is not v:
                    found.append((name + "." + k + (" removed" if now is _miss else
                                                    " replaced"), crit))
            if _len(d) != _len(copy):
                for k in list(dict.keys(d)):
                    if _type(k) is not _str:
                        found.append((name + ": a key that is not a string was added", crit))
                    elif k not in copy and _type(dict.get(d, k)) is not _Mod and not (
                            k == "__warningregistry__" and _registry_ok(dict.get(d, k))):
                        found.append((name + "." + k + " added", crit))
        for qual, cls, copy, crit in snap["classes"] if full else ():
            d = _tdict(cls)
            for k, v in copy.items():
                now = types.MappingProxyType.get(d, k, _miss)
                if now is not v and not _expected(qual, k, now):
                    found.append((qual + "." + k + (" removed" if now is _miss else
                                                    " replaced"), crit))
            if _len(d) != _len(copy):
                for k in list(types.MappingProxyType.keys(d)):
                    if _type(k) is _str and k not in copy and not _sw(k, "_pytest_"):
                        found.append((qual + "." + k + " added", crit))
        pm = snap["pm"]
        n2p = _oga(pm, "_name2plugin")
        if n2p is not snap["n2p"]:
            found.append(("the plugin manager's plugin table was replaced", True))
        else:
            old = snap["n2p_copy"]
            for k in list(dict.keys(n2p)) if full or _len(n2p) != _st["n2p_len"] else ():
                p = dict.get(n2p, k)
                if _type(k) is _str and k not in old and p is not None and not _late_ok(p):
                    found.append(("plugin registered: " + k + " (" + _describe(p) + ")", True))
        relay = _oga(_oga(pm, "hook"), "__dict__")
        if relay is not snap["relay"]:
            found.append(("the plugin manager's hooks were replaced", True))
        seen_impls = _st["seen_impls"]
        for h, hc, impls, pairs in snap["hooks"] if full else snap["every_hooks"]:
            # after each test, only whether the hook and its list are the ones seen last
            # (identity, compared in C): the per-test cost of the channel; what changed is
            # looked at in detail then, and always in a full check (each implementation's
            # function too)
            last = dict.get(seen_impls, h)
            if not full and dict.get(relay, h) is hc and _oga(hc, "_hookimpls") is impls \
                    and _len(impls) == _len(last) and _all(_map(_is, impls, last)):
                continue
            if dict.get(relay, h) is not hc:
                found.append(("hook " + h + " replaced", True))
                continue
            now = _oga(hc, "_hookimpls")
            if now is not impls:
                found.append(("hook " + h + ": implementation list replaced", True))
                continue
            # ids stay valid: the snapshot and ``ok_keep`` hold every object they name
            now_ids = {_id(x) for x in now}
            for impl, fn in pairs:
                if _id(impl) not in now_ids:
                    found.append(("hook " + h + ": an implementation was removed", True))
                elif _oga(impl, "function") is not fn:
                    found.append(("hook " + h + ": an implementation's function was replaced",
                                  True))
            for impl in now:
                if _id(impl) in ok_ids:
                    continue
                p, fn = _oga(impl, "plugin"), _oga(impl, "function")
                # what pluggy calls, captured at registration, must be the plugin's own
                if _late_ok(p) and _own_hook(p, fn):
                    ok_ids.add(_id(impl))
                    _st["ok_keep"].append((impl, fn))
                else:
                    found.append(("hook " + h + " implemented by " + _describe(p), True))
            seen_impls[h] = list(now)
        for impl, fn in _st["ok_keep"] if full else ():
            if _oga(impl, "function") is not fn:
                found.append(("a late plugin's hook implementation had its function replaced",
                              True))
        _st["n2p_len"] = _len(n2p)
        for what, crit in found:
            if what not in _st["said"]:
                _st["said"].add(what)
                _say("patched" if crit else "changed", (what,))

    def hook(event, args, _st=state, _w=os.write, _mac=blake2b, _key=bytes(nonce),
             _enc=str.encode, _join=str.join, _repl=str.replace, _sw=str.startswith,
             _ew=str.endswith, _type=type, _str=str, _bool=bool, _tuple=tuple, _len=len, _id=id,
             _dget=dict.get, _ditems=dict.items, _dkeys=dict.keys, _dcopy=dict.copy,
             _lappend=list.append, _sadd=set.add, _isinst=isinstance, _typ=type,
             _tdict=type.__dict__["__dict__"].__get__,
             _mdict=types.ModuleType.__dict__["__dict__"].__get__, _oga=object.__getattribute__,
             _pget=types.MappingProxyType.get, _pitems=types.MappingProxyType.items,
             _Mod=types.ModuleType, _Func=types.FunctionType, _sm=staticmethod, _cm=classmethod,
             _modules=sys.modules, _watch=frozenset(watch), _fattrs=frozenset(func_attrs),
             _prefixes=tuple(prefixes), _critical=frozenset(critical), _hooks=tuple(hooks),
             _miss=miss, _BaseExc=BaseException, _say=_say, _attr_event=_attr_event,
             _snapshot=_snapshot, _compare=_compare, _arm_plugins=_arm_plugins):
        if _type(event) is not _str:
            return
        try:
            if _sw(event, "andon."):
                pass
            elif not _st["armed"]:
                return
            elif event in _watch:
                if event not in _st["said"]:
                    _sadd(_st["said"], event)
                    _say("event", (event,))
                return
            elif event == "object.__setattr__" or event == "object.__getattr__":
                _attr_event(event, args)
                return
            else:
                return
            if event == "andon.arm":
                if _st["armed"]:
                    _say("forged-event", ("andon.arm raised again",))
                elif _len(args) == 1:
                    _st["snap"] = _snapshot(args[0])
                    _arm_plugins(_st["snap"]["funcs"])
                    _st["armed"] = True
                    _say("armed", ())
            elif event == "andon.boot":
                if _st["armed"] or "boot" in _st["said"]:
                    _say("forged-event", ("andon.boot raised again",))
                elif _len(args) == 1 and _type(args[0]) is _str:
                    _sadd(_st["said"], "boot")
                    _say("boot", args)
            elif event == "andon.check" and _st["armed"]:
                _compare(_len(args) == 1 and args[0] is True)
            elif event == "andon.outcome":
                if _len(args) == 5 and all(_type(a) is _str for a in args):
                    _say("outcome", args)
                else:
                    _say("forged-event", ("andon.outcome with arguments of the wrong type",))
            elif event == "andon.note":
                if _len(args) == 1 and _type(args[0]) is _str:
                    _say("note", args)
            elif event == "andon.end":
                if _st["armed"]:
                    _compare(True)
                _say("end", ())
        except _BaseExc:  # the hook must never break what it watches; a lost line is detected
            pass

    # The process raises ~70 audit events a test (``builtins.id``, ``object.__getattr__``,
    # ``os.putenv`` …) and nearly all of them concern no one here. Each call of a function copies
    # its default arguments into the frame, so the hook pytest's events enter has few of them and
    # passes on only what ``hook`` answers: events named in ``wanted`` and attribute events on
    # one of the hook's own objects (by ``id``, which runs no code of the object; its own
    # ``builtins.id`` event comes back here and is ignored).
    wanted = frozenset(("andon.boot", "andon.arm", "andon.check", "andon.outcome", "andon.note",
                        "andon.end", "object.__setattr__", *watch))
    guard: set = set()

    def fast(event, args, _type=type, _str=str, _id=id, _wanted=wanted, _guard=guard,
             _hook=hook):
        try:
            if _type(event) is not _str:
                return
            if event == "object.__getattr__":
                if _id(args[0]) in _guard:
                    _hook(event, args)
            elif event in _wanted:
                _hook(event, args)
        except BaseException:  # noqa: BLE001 - the hook must never break what it watches
            pass

    state["hook"] = fast
    state["guard"] = guard
    guard.update(id(f) for f in (fast, hook, state, guard, _say, _attr_event, _snapshot,
                                 _compare, _expected, *plugins[:5], *_kept))
    sys.addaudithook(fast)
