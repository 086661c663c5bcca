"""What a name or a string in one file really is, as far as the file itself says.

Two things every ``patterns`` rule needs, so that a rule sees ``_pytest`` whether the file
writes it as ``"_pytest"``, ``"_py" + "test"`` or ``"".join(["_py", "test"])``:

- :func:`fold`: the string value of an expression made only of literal pieces — ``+``,
  f-strings, ``%``, ``str.format``, ``sep.join([...])``, ``[::-1]`` and other constant
  slices, ``.lower()``/``.upper()``/``.strip()``/``.replace()``/``.decode()``, ``chr(n)``,
  ``str(x)``, and names the file assigns exactly once to such a value. ``None`` when any
  piece is not a literal (a parameter, a call result, something read at run time).
- :class:`Resolver.canonical`: the dotted name an expression refers to, with import aliases
  undone (``import importlib.util as iu`` → ``iu.spec_from_loader`` is
  ``importlib.util.spec_from_loader``), single-assignment aliases followed (``env =
  os.environ``), and the reflective spellings read as the plain one: ``getattr(X, "a")`` is
  ``X.a``, ``__import__("m")`` / ``importlib.import_module("m")`` / ``sys.modules["m"]`` are
  ``m`` — each with a folded string.

Limits: one file at a time, no data flow beyond single assignments (a string built in a
loop, read from a file or passed as a parameter is not folded).
"""

from __future__ import annotations

import ast

_STR_METHODS = {"lower", "upper", "strip", "lstrip", "rstrip", "replace", "title",
                "casefold", "removeprefix", "removesuffix", "capitalize", "swapcase"}
IMPORTERS = {"__import__", "builtins.__import__", "importlib.import_module",
             "importlib.__import__"}


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a chain of names and attributes; ``""`` for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _seq(node: ast.AST, names: dict[str, object]) -> list[str] | None:
    if isinstance(node, ast.Name) and isinstance(seq := names.get(node.id), tuple):
        return list(seq)
    if isinstance(node, (ast.List, ast.Tuple)):
        out = [fold(e, names) for e in node.elts]
        return None if any(x is None for x in out) else out  # type: ignore[return-value]
    return None


def fold(node: ast.AST | None, names: dict[str, object] | None = None) -> str | None:
    """The string value of ``node`` when it is built only from literal pieces (see module
    docstring); ``names`` maps a name to its folded value (str) or list of strings (tuple)."""
    names = names or {}
    try:
        return _fold(node, names)
    except (TypeError, ValueError, IndexError, KeyError, OverflowError, UnicodeError):
        return None  # "%d" % "x", "{0}".format(): not a value we can compute


def _fold(node: ast.AST | None, names: dict[str, object]) -> str | None:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            return node.value
        return None
    if isinstance(node, ast.Name):
        v = names.get(node.id)
        return v if isinstance(v, str) else None
    if isinstance(node, ast.BinOp):
        left = _fold(node.left, names)
        if left is None:
            return None
        if isinstance(node.op, ast.Add):
            right = _fold(node.right, names)
            return None if right is None else left + right
        if isinstance(node.op, ast.Mod):
            args = _seq(node.right, names) if isinstance(node.right, ast.Tuple) else None
            if args is None:
                one = _scalar(node.right, names)
                return None if one is None else left % one
            return left % tuple(args)
        return None
    if isinstance(node, ast.JoinedStr):
        out = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                out.append(str(v.value))
            elif isinstance(v, ast.FormattedValue) and v.format_spec is None:
                s = _scalar(v.value, names)
                if s is None:
                    return None
                out.append(str(s))
            else:
                return None
        return "".join(out)
    if isinstance(node, ast.Subscript):
        base = _fold(node.value, names)
        if base is None:
            return None
        sl = node.slice
        if isinstance(sl, ast.Slice):
            parts = [None if p is None else _int(p) for p in (sl.lower, sl.upper, sl.step)]
            if any(p is False for p in parts):
                return None
            return base[slice(*parts)]
        i = _int(sl)
        return None if i is False else base[i]
    if isinstance(node, ast.Call):
        return _fold_call(node, names)
    return None


def _int(node: ast.AST) -> int | bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int(node.operand)
        return False if v is False else -v
    return False


def _scalar(node: ast.AST, names: dict[str, object]) -> object:
    s = _fold(node, names)
    if s is not None:
        return s
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    return None


def _fold_call(node: ast.Call, names: dict[str, object]) -> str | None:
    f = node.func
    if isinstance(f, ast.Name) and len(node.args) == 1 and not node.keywords:
        if f.id == "chr":
            i = _int(node.args[0])
            return None if i is False else chr(i)
        if f.id == "str":
            s = _scalar(node.args[0], names)
            return None if s is None else str(s)
        return None
    if not isinstance(f, ast.Attribute):
        return None
    if f.attr == "decode" and isinstance(f.value, ast.Constant) \
            and isinstance(f.value.value, bytes):
        return f.value.value.decode()
    base = _fold(f.value, names)
    if base is None:
        return None
    if f.attr == "join" and len(node.args) == 1:
        items = _seq(node.args[0], names)
        if items is None and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):
            items = _chr_comp(node.args[0], names)
        return None if items is None else base.join(items)
    args = [_scalar(a, names) for a in node.args]
    kwargs = {k.arg: _scalar(k.value, names) for k in node.keywords if k.arg}
    if any(a is None for a in args) or any(v is None for v in kwargs.values()) \
            or len(kwargs) != len(node.keywords):
        return None
    if f.attr == "format":
        return base.format(*args, **kwargs)
    if f.attr in _STR_METHODS:
        return getattr(base, f.attr)(*args, **kwargs)
    return None


def _chr_comp(node: ast.GeneratorExp | ast.ListComp, names: dict[str, object]) -> list[str] | None:
    """``"".join(chr(c) for c in [95, 112, ...])``: the one comprehension shape worth folding."""
    if len(node.generators) != 1 or node.generators[0].ifs:
        return None
    gen = node.generators[0]
    elt = node.elt
    if not (isinstance(elt, ast.Call) and isinstance(elt.func, ast.Name) and elt.func.id == "chr"
            and len(elt.args) == 1 and isinstance(gen.target, ast.Name)
            and isinstance(elt.args[0], ast.Name) and elt.args[0].id == gen.target.id
            and isinstance(gen.iter, (ast.List, ast.Tuple))):
        return None
    codes = [_int(e) for e in gen.iter.elts]
    if any(c is False for c in codes):
        return None
    return [chr(c) for c in codes]


def relative(node: ast.AST) -> bool:
    """``node`` builds a relative module name: a string, ``"." + x`` or an f-string that
    starts with a dot."""
    first = node
    while isinstance(first, ast.BinOp) and isinstance(first.op, ast.Add):
        first = first.left
    if isinstance(first, ast.JoinedStr) and first.values:
        first = first.values[0]
    return isinstance(first, ast.Constant) and isinstance(first.value, str) \
        and first.value.startswith(".")


def bindings(tree: ast.AST, nodes: list[ast.AST] | None = None) -> dict[str, object]:
    """Names assigned exactly once in the file to a foldable string (→ str) or a list/tuple
    of them (→ tuple); chains (``a = "_py"``, ``b = a + "test"``) resolve."""
    counts: dict[str, int] = {}
    values: dict[str, ast.AST] = {}
    for n in nodes if nodes is not None else ast.walk(tree):
        targets = n.targets if isinstance(n, ast.Assign) else \
            [n.target] if isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.For)) else []
        for t in targets:
            for name in ast.walk(t):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
        if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                and isinstance(n.targets[0], ast.Name):
            values[n.targets[0].id] = n.value
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value:
            values[n.target.id] = n.value
    out: dict[str, object] = {}
    for _ in range(3):  # chains of single assignments, a few deep
        for var, value in values.items():
            if counts.get(var) != 1 or var in out:
                continue
            s = fold(value, out)
            if s is not None:
                out[var] = s
            elif (seq := _seq(value, out)) is not None:
                out[var] = tuple(seq)
    return out


# Modules whose name read as an attribute of an imported module means the module itself.
REACHED_MODULES = frozenset({"sys", "os", "builtins", "importlib", "gc", "inspect", "types",
                             "ctypes", "marshal", "runpy", "site", "subprocess"})


class Resolver:
    """Canonical dotted names in one parsed file (see the module docstring)."""

    def __init__(self, tree: ast.Module):
        nodes = list(ast.walk(tree))  # one walk, shared: big files are parsed whole
        self.names = bindings(tree, nodes)
        self.aliases: dict[str, str] = {}   # local name -> dotted module or attribute
        self.imported: dict[str, str] = {}  # local names bound by import -> what they import
        for n in nodes:
            if isinstance(n, ast.Import):
                for a in n.names:
                    local = a.asname or a.name.split(".")[0]
                    target = a.name if a.asname else a.name.split(".")[0]
                    self.aliases[local] = target
                    self.imported[local] = target
            elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
                for a in n.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{n.module}.{a.name}"
                        self.imported[a.asname or a.name] = f"{n.module}.{a.name}"
        counts: dict[str, int] = {}
        for n in nodes:
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                counts[n.id] = counts.get(n.id, 0) + 1
        for n in nodes:  # env = os.environ; m = sys.modules: follow the alias
            if isinstance(n, ast.Assign) and len(n.targets) == 1 \
                    and isinstance(n.targets[0], ast.Name) and counts[n.targets[0].id] == 1 \
                    and n.targets[0].id not in self.aliases:
                target = self.canonical(n.value)
                if target and "." in target:
                    self.aliases[n.targets[0].id] = target

        # for k in ("ANDON_RUN", "CI"): a loop name takes each of a literal sequence's values
        self.loops: dict[str, list[str]] = {}
        for n in nodes:
            if isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name):
                seq = _seq(n.iter, self.names)
                if seq is not None:
                    self.loops.setdefault(n.target.id, []).extend(seq)

    def fold(self, node: ast.AST | None) -> str | None:
        return fold(node, self.names)

    def values(self, node: ast.AST | None) -> list[str]:
        """Every string ``node`` can be: its folded value, or each value of a literal
        sequence a loop name runs over; ``[]`` when unknown."""
        s = self.fold(node)
        if s is not None:
            return [s]
        if isinstance(node, ast.Name):
            return list(self.loops.get(node.id, []))
        return []

    def canonical(self, node: ast.AST) -> str:
        """The dotted name ``node`` refers to (see the module docstring); ``""`` if none."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.canonical(node.value)
            if node.attr in REACHED_MODULES and isinstance(node.value, ast.Name) \
                    and node.value.id in self.imported:
                # logging.sys, os.sys, json.re …: a module reached through another module's
                # import is that module (an adversary put a finder on logging.sys.meta_path)
                return node.attr
            return f"{base}.{node.attr}" if base else ""
        if isinstance(node, ast.Call):
            fn = self.canonical(node.func)
            if fn in ("getattr", "builtins.getattr") and len(node.args) >= 2:
                base, attr = self.canonical(node.args[0]), self.fold(node.args[1])
                return f"{base}.{attr}" if base and attr else ""
            if fn in IMPORTERS and node.args:
                return self.fold(node.args[0]) or ""
            return ""
        if isinstance(node, ast.Subscript):
            owner = self.canonical(node.value)
            key = self.fold(node.slice)
            if owner == "sys.modules":
                return key or ""
            if owner in ("__builtins__", "builtins.__dict__") and key:
                return f"builtins.{key}"  # __builtins__["exec"] is builtins.exec
        return ""
