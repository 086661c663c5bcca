"""Writes into a namespace dict, for ``monkeypatch`` (production.py) and ``dynamic-attr``
(integrity.py), which each decide whose namespace counts.

A namespace is ``vars(x)``, ``x.__dict__`` or ``f.__globals__`` (the globals of the module
that defined ``f``), reached directly, through a walrus, or through a name the file binds
exactly once to one (``_ns = vars(ops)``; a chain of such names too). A write is a subscript
store or ``del`` on it, ``|=``, a dict method that changes it (``NAMESPACE_WRITES``) called on
it or through the class (``dict.update(ns, ...)``), and ``operator.setitem`` / ``delitem``.

Limits: one file; a namespace passed to a function, kept in a container or returned by a
call the file defines is not followed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .resolve import Resolver

NAMESPACE_WRITES = frozenset({"update", "setdefault", "__setitem__", "__delitem__", "pop",
                              "popitem", "clear", "__ior__"})
OPERATOR_WRITES = frozenset({"operator.setitem", "operator.delitem", "operator.__setitem__",
                             "operator.__delitem__", "_operator.setitem", "_operator.delitem"})
# the name written is the first argument (after the namespace, for operator's functions)
_KEYED = frozenset({"setdefault", "__setitem__", "__delitem__", "pop", "setitem", "delitem"})


@dataclass(frozen=True)
class Write:
    """One write into a namespace: ``owner`` is whose (``ops`` of ``vars(ops)``, ``f`` of
    ``f.__globals__``), ``via`` how it was reached (``vars``, ``__dict__``, ``__globals__``),
    ``literal`` whether every name it writes is a literal string."""

    owner: ast.expr
    via: str
    literal: bool
    said: str  # the write as the file spells it, for a message


def _said(node: ast.AST) -> str:
    try:
        return ast.unparse(node)[:80]
    except Exception:  # noqa: BLE001 - unparse of a strange node: say nothing specific
        return "a namespace write"


class Namespaces:
    """The namespace writes of one file (see the module docstring)."""

    def __init__(self, tree: ast.Module, resolver: Resolver):
        self.r = resolver
        counts: dict[str, int] = {}
        values: dict[str, ast.expr] = {}
        nodes = list(ast.walk(tree))
        # `ns |= {...}` updates a dict in place: the name still holds the namespace
        merged = {id(n.target) for n in nodes if isinstance(n, ast.AugAssign)
                  and isinstance(n.op, ast.BitOr)}
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in merged:
                counts[n.id] = counts.get(n.id, 0) + 1
            elif isinstance(n, ast.arg):
                counts[n.arg] = counts.get(n.arg, 0) + 1
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name):
                values[n.targets[0].id] = n.value
            elif isinstance(n, (ast.AnnAssign, ast.NamedExpr)) \
                    and isinstance(n.target, ast.Name) and n.value is not None:
                values[n.target.id] = n.value
        self.aliases: dict[str, tuple[ast.expr, str]] = {}
        for _ in range(3):  # _ns = vars(ops); d = _ns: a few names deep
            for name, value in values.items():
                if counts.get(name) == 1 and name not in self.aliases \
                        and (found := self.namespace(value)) is not None:
                    self.aliases[name] = found

    def namespace(self, expr: ast.AST) -> tuple[ast.expr, str] | None:
        """(whose namespace, how reached) when ``expr`` is one; None otherwise."""
        if isinstance(expr, ast.NamedExpr):
            return self.namespace(expr.value)
        if isinstance(expr, ast.Name):
            return self.aliases.get(expr.id)
        if isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords \
                and self.r.canonical(expr.func) in ("vars", "builtins.vars"):
            return expr.args[0], "vars"
        if isinstance(expr, ast.Attribute) and expr.attr in ("__dict__", "__globals__"):
            return expr.value, expr.attr
        return None

    def _names_literal(self, method: str, args: list[ast.expr],
                       keywords: list[ast.keyword]) -> bool:
        if method in _KEYED:
            return bool(args) and self.r.fold(args[0]) is not None
        if method in ("update", "__ior__"):
            return all(k.arg is not None for k in keywords) and all(
                isinstance(a, ast.Dict) and all(k is not None and self.r.fold(k) is not None
                                                for k in a.keys) for a in args)
        return False  # popitem, clear: whichever names are there

    def call(self, node: ast.Call) -> Write | None:
        """The write ``node`` makes, if it is one: ``ns.update(...)``,
        ``dict.update(ns, ...)``, ``operator.setitem(ns, k, v)``."""
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in NAMESPACE_WRITES:
            if (found := self.namespace(f.value)) is not None:
                return Write(*found, self._names_literal(f.attr, node.args, node.keywords),
                             _said(node))
            if self.r.canonical(f.value) == "dict" and node.args \
                    and (found := self.namespace(node.args[0])) is not None:
                return Write(*found, self._names_literal(f.attr, node.args[1:],
                                                         node.keywords), _said(node))
        fn = self.r.canonical(f)
        if fn in OPERATOR_WRITES and node.args \
                and (found := self.namespace(node.args[0])) is not None:
            method = fn.split(".")[-1].strip("_")
            return Write(*found, self._names_literal(method, node.args[1:], []), _said(node))
        return None

    def stores(self, node: ast.AST) -> list[Write]:
        """The writes of an assignment's, ``del``'s or ``|=``'s targets (``ns[k] = v``,
        ``del ns[k]``, ``ns |= {...}``); a target ``ns`` of a plain assignment rebinds the
        name and writes nothing."""
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        out = []
        for t in targets:
            for n in ast.walk(t):
                if isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) \
                        and (found := self.namespace(n.value)) is not None:
                    out.append(Write(*found, self.r.fold(n.slice) is not None, _said(n)))
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.BitOr) \
                and (found := self.namespace(node.target)) is not None:
            out.append(Write(*found, self._names_literal("update", [node.value], []),
                             _said(node).split("\n")[0]))
        return out
