"""Which code a class can reach, read from the exact source Python compiles, and whether it names
one of a set of forbidden names.

The scan parses the submission's bytes (ast.parse decodes them as compile() does: BOM, coding
cookie, and only \\n, \\r\\n and \\r end a line). It follows, from every binding of the class's name,
each name the reached code loads to the bindings that name can have in its scope - assignments,
defs and classes at any depth (inside `if`, `try`, loops, functions), imports of every form and
alias, loop and `with` targets, walrus, `global` - and checks every identifier, attribute, import
and string the reached code holds, strings folded from constant pieces ("Multi" + "headAttention")
included. A self-test that the class cannot reach (under `if __name__ == "__main__":`, say) may
name anything.

Linear in the size of the source: every node is visited at most twice (once to bind names, once
when reached), and each (scope, name) is resolved once, so a thousand definitions of one name
cost a thousand, not a million. Nothing here recurses on the tree, so deep nesting cannot exhaust
the stack.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from sandbox.errors import GraderError

FOLD_LIMIT = 4096   # longest string assembled from pieces; forbidden names are far shorter
STR_METHODS = {"join", "replace", "lower", "upper", "title", "capitalize", "swapcase", "strip",
               "lstrip", "rstrip", "format", "removeprefix", "removesuffix"}


class ScanError(GraderError):
    """The source could not be scanned; the caller must report it, never read it as 'clean'."""


@dataclass
class _Scope:
    kind: str                      # "module" | "function" | "comprehension" | "class"
    parent: _Scope | None
    bindings: dict[str, list] = field(default_factory=dict)
    globals_: set[str] = field(default_factory=set)
    nonlocals: set[str] = field(default_factory=set)

    def bind(self, name: str, binder) -> None:
        target = self
        if name in self.globals_:
            target = self.module()
        elif name in self.nonlocals:
            target = self.parent_function() or self.module()
        target.bindings.setdefault(name, []).append(binder)

    def module(self) -> _Scope:
        scope = self
        while scope.parent is not None:
            scope = scope.parent
        return scope

    def parent_function(self) -> _Scope | None:
        scope = self.parent
        while scope is not None and scope.kind not in ("function", "comprehension"):
            scope = scope.parent
        return scope

    def resolve(self, name: str) -> _Scope:
        """The scope a load of `name` here reads, by Python's rules (class bodies are not seen
        from the functions inside them); the module when no scope binds it (a builtin)."""
        if name in self.globals_:
            return self.module()
        scope: _Scope | None = self
        first = True
        while scope is not None:
            if (first or scope.kind != "class") and name in scope.bindings:
                return scope
            scope, first = scope.parent, False
        return self.module()


@dataclass(frozen=True)
class Hit:
    line: int
    what: str


def find_forbidden(source: bytes | str, names, *, inside_class: str) -> Hit | None:
    """The first place the code `class inside_class` can reach names one of `names`; None when it
    names none. Raises ScanError when the source cannot be read."""
    if not source:
        raise ScanError("the grader has no copy of the source")
    try:
        tree = ast.parse(source)
        return _Scan(tree, tuple(names)).run(inside_class)
    except ScanError:
        raise
    except (SyntaxError, ValueError, MemoryError, RecursionError, TypeError) as err:
        raise ScanError(f"{type(err).__name__}: {err}") from err


class _Scan:
    def __init__(self, tree: ast.Module, names: tuple[str, ...]):
        self.tree = tree
        self.names = set(names)
        self.pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])")
        self.module = _Scope("module", None)
        self.scope_of: dict[int, _Scope] = {}      # id(Name node) -> the scope it is evaluated in
        self.import_module: dict[int, str] = {}    # id(alias) -> the module of its `from X import`
        self.folded: dict[int, str | None] = {}
        self.classes: list[ast.ClassDef] = []
        self.changes: list[tuple[ast.Name, ast.AST]] = []  # (X, a statement that sets X.attr or X[i])
        self._bind_all()
        for name, statement in self.changes:  # `Class.forward = f` and setattr(Class, ...) change Class
            self.scope_of[id(name)].resolve(name.id).bindings.setdefault(name.id, []).append(statement)

    # -- pass 1: every binding of every name, in its scope ----------------------------------
    def _bind_all(self) -> None:
        stack: list[tuple[ast.AST, _Scope, object]] = [(self.tree, self.module, None)]
        while stack:
            node, scope, binder = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inner = _Scope("function", scope)
                if not isinstance(node, ast.Lambda):
                    scope.bind(node.name, node)
                    outer_parts = node.decorator_list + [node.returns] if node.returns else node.decorator_list
                else:
                    outer_parts = []
                args = node.args
                outer_parts = list(outer_parts) + args.defaults + [d for d in args.kw_defaults if d]
                for part in outer_parts:
                    stack.append((part, scope, binder))
                for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                    if arg is not None:
                        inner.bind(arg.arg, node)
                        if arg.annotation is not None:
                            stack.append((arg.annotation, scope, binder))
                body = node.body if isinstance(node.body, list) else [node.body]
                self._declare(body, inner)
                stack.extend((child, inner, None) for child in reversed(body))
                continue
            if isinstance(node, ast.ClassDef):
                scope.bind(node.name, node)
                self.classes.append(node)
                for piece in [*node.decorator_list, *node.bases, *node.keywords]:
                    stack.append((piece, scope, binder))
                inner = _Scope("class", scope)
                self._declare(node.body, inner)
                stack.extend((child, inner, None) for child in reversed(node.body))
                continue
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                inner = _Scope("comprehension", scope)
                stack.extend((child, inner, binder) for child in ast.iter_child_nodes(node))
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if isinstance(node, ast.ImportFrom):
                        self.import_module[id(alias)] = node.module or ""
                    if alias.name != "*":
                        scope.bind(alias.asname or alias.name.split(".")[0], alias)
                continue
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Load):
                    self.scope_of[id(node)] = scope
                else:
                    scope.bind(node.id, binder if binder is not None else node)
                continue
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                binder = node
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    self._note_change(target, node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("setattr", "delattr") and node.args:
                self._note_change(node.args[0], node, attribute=False)
            elif isinstance(node, ast.NamedExpr):  # binds in the scope around the comprehensions
                home = scope
                while home.kind == "comprehension":
                    assert home.parent is not None  # a comprehension's scope is always inside another
                    home = home.parent
                home.bind(node.target.id, node.value)
                stack.append((node.value, scope, binder))
                continue
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                stack.append((node.target, scope, node.iter))
                stack.extend((child, scope, None) for child in [node.iter, *node.body, *node.orelse])
                continue
            elif isinstance(node, ast.withitem):
                if node.optional_vars is not None:
                    stack.append((node.optional_vars, scope, node.context_expr))
                stack.append((node.context_expr, scope, binder))
                continue
            elif isinstance(node, ast.comprehension):
                stack.append((node.target, scope, node.iter))
                stack.extend((child, scope, binder) for child in [node.iter, *node.ifs])
                continue
            elif isinstance(node, ast.ExceptHandler):
                if node.name:
                    scope.bind(node.name, node.type or node)
            elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
                scope.bind(node.name, node)
            elif isinstance(node, ast.MatchMapping) and node.rest:
                scope.bind(node.rest, node)
            elif isinstance(node, ast.stmt):
                binder = None
            stack.extend((child, scope, binder) for child in ast.iter_child_nodes(node))

    def _note_change(self, target, statement, *, attribute: bool = True) -> None:
        """Remember `statement` as a change of X when it stores into X.a, X[i] or X.a.b, or is
        setattr(X, ...): whoever reaches X reaches what was put into it."""
        if attribute:
            if not isinstance(target, (ast.Attribute, ast.Subscript)):
                return
            while isinstance(target, (ast.Attribute, ast.Subscript)):
                target = target.value
        if isinstance(target, ast.Name):
            self.changes.append((target, statement))

    @staticmethod
    def _declare(body: list, scope: _Scope) -> None:
        """`global` and `nonlocal` of a function or class body, before its names are bound."""
        stack = list(body)
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Global):
                scope.globals_.update(node.names)
            elif isinstance(node, ast.Nonlocal):
                scope.nonlocals.update(node.names)
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                stack.extend(ast.iter_child_nodes(node))

    # -- pass 2: what the class reaches ------------------------------------------------------
    def run(self, class_name: str) -> Hit | None:
        todo = list(self.module.bindings.get(class_name, []))
        todo += [c for c in self.classes if c.name == class_name]  # a class made in a function
        if not todo:  # bound by no statement (globals()[...] = ...): all the code may be its
            todo = [self.tree]
        resolved: set[tuple[int, str]] = set()
        seen: set[int] = set()
        hits: list[Hit] = []
        while todo:
            start = todo.pop()
            stack = [start]
            while stack:
                node = stack.pop()
                if id(node) in seen:
                    continue
                seen.add(id(node))
                hit = self._names_forbidden(node)
                if hit:
                    hits.append(hit)
                if isinstance(node, ast.Name) and id(node) in self.scope_of:
                    scope = self.scope_of[id(node)].resolve(node.id)
                    key = (id(scope), node.id)
                    if key not in resolved:
                        resolved.add(key)
                        todo.extend(scope.bindings.get(node.id, []))
                if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                    continue  # a docstring or a bare string: it does nothing
                stack.extend(ast.iter_child_nodes(node))
        return min(hits, key=lambda h: h.line) if hits else None

    def _names_forbidden(self, node) -> Hit | None:
        line = getattr(node, "lineno", None)
        texts: list[str] = []
        if isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, ast.alias):
            texts = node.name.split(".") + [node.asname or ""]
            texts += self.import_module.get(id(node), "").split(".")
        elif isinstance(node, (ast.ImportFrom,)):
            texts = (node.module or "").split(".")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            texts = [node.name]
        elif isinstance(node, ast.keyword) and node.arg:
            texts = [node.arg]
        for text in texts:
            if text in self.names:
                return Hit(line or 0, text)
        if isinstance(node, (ast.Constant, ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)):
            value = self._fold(node)
            if value:
                found = self.pattern.search(value)
                if found:
                    return Hit(line or 0, f"{found.group(1)} (in the string {value[:80]!r})")
        return None

    def _fold(self, root) -> str | None:
        """The string an expression of constant pieces evaluates to, or None; memoised and
        without recursion, so each node is folded once."""
        order, stack = [], [root]
        while stack:
            node = stack.pop()
            if id(node) in self.folded:
                continue
            order.append(node)
            if isinstance(node, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript, ast.FormattedValue,
                                 ast.List, ast.Tuple, ast.Attribute, ast.Slice, ast.UnaryOp)):
                stack.extend(ast.iter_child_nodes(node))
        for node in reversed(order):
            if id(node) not in self.folded:
                self.folded[id(node)] = _fold_one(node, self.folded)
        value = self.folded.get(id(root))
        return value if isinstance(value, str) else None


def _fold_one(node, folded: dict):
    """One step of constant folding: strings, ints, lists of them. Anything else is None."""
    def val(n):
        return folded.get(id(n)) if n is not None else None
    try:
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, (str, int)) and not isinstance(node.value, bool) else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(val(node.operand), int):
            return -val(node.operand)
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [val(e) for e in node.elts]
            return items if all(i is not None for i in items) else None
        if isinstance(node, ast.FormattedValue):
            return str(val(node.value)) if val(node.value) is not None and node.format_spec is None else None
        if isinstance(node, ast.JoinedStr):
            parts = [val(v) for v in node.values]
            return _capped("".join(parts)) if all(isinstance(p, str) for p in parts) else None
        if isinstance(node, ast.BinOp):
            left, right = val(node.left), val(node.right)
            if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
                return _capped(left + right)
            if isinstance(node.op, ast.Mult) and isinstance(left, str) and isinstance(right, int):
                return _capped(left * right) if len(left) * max(right, 0) <= FOLD_LIMIT else None
            if isinstance(node.op, ast.Mod) and isinstance(left, str) and right is not None:
                return _capped(left % (tuple(right) if isinstance(right, list) else right))
            return None
        if isinstance(node, ast.Slice):
            return None
        if isinstance(node, ast.Subscript):
            base = val(node.value)
            if not isinstance(base, (str, list)):
                return None
            s = node.slice
            if isinstance(s, ast.Slice):
                ends = (s.lower, s.upper, s.step)
                bounds = [val(p) if p is not None else None for p in ends]
                if any(p is not None and not isinstance(b, int) for p, b in zip(ends, bounds)):
                    return None
                return base[slice(*bounds)]
            index = val(s)
            return base[index] if isinstance(index, int) else None
        if isinstance(node, ast.Call) and not node.keywords:
            func = node.func
            if isinstance(func, ast.Name) and func.id == "map" and len(node.args) == 2 and \
                    isinstance(node.args[0], ast.Name) and node.args[0].id == "chr" and isinstance(val(node.args[1]), list):
                return [chr(i) for i in val(node.args[1])]
            args = [val(a) for a in node.args]
            if any(a is None for a in args):
                return None
            if isinstance(func, ast.Name) and func.id == "chr" and len(args) == 1 and isinstance(args[0], int):
                return chr(args[0])
            if isinstance(func, ast.Name) and func.id in ("reversed", "list", "tuple", "str") and len(args) == 1:
                return list(reversed(args[0])) if func.id == "reversed" else (
                    args[0] if func.id == "str" and isinstance(args[0], str) else list(args[0]))
            if isinstance(func, ast.Attribute) and func.attr in STR_METHODS:
                owner = val(func.value)
                if isinstance(owner, str):
                    return _capped(getattr(str, func.attr)(owner, *args))
            return None
    except (TypeError, ValueError, IndexError, OverflowError, KeyError):
        return None
    return None


def _capped(text):
    return text if isinstance(text, str) and len(text) <= FOLD_LIMIT else None
