"""A normal form of Python source for comparing submissions: what a disguise changes, it drops.

The similarity finder (grader.similarity) hashes runs of tokens; a copy disguised by renaming, dead
code, split or merged lines, reordered statements or an equivalent tensor op would leave few runs in
common. So before the tokens are taken, the code is parsed and rewritten:

- dead code goes: docstrings and other bare constants, `pass`, `assert`, `print(...)`, imports,
  branches under a constant false test (a module-level flag such as `DEBUG = False` included),
  statements after a `return` or `raise`, and assignments whose name (or `self.` attribute) is never read;
- one form for equivalent ops: `torch.f(x, ...)` / `F.f(x, ...)` become `x.f(...)`; `matmul`, `bmm` and a
  two-operand `einsum` become `@`; `.mT`, `.transpose(-1, -2)` and a 4-d `.permute(0, 2, 1, 3)` become
  `.transpose`s; `.view` is `.reshape`, `.contiguous()` goes, `.size(i)` is `.shape[i]`, `chunk` is
  `split`, `sqrt(d)` is `d ** 0.5` and a product with a reciprocal a quotient, every spelling of
  -inf one constant, `logical_not` is `~`, a lone `dim=` keyword positional;
- a name assigned once and read once (a split line) is put back where it is read, so split and merged
  lines read alike;
- independent statements are put in one order (the smallest first among those whose inputs are
  ready), so reordering them changes nothing.

The result is a list of statements, each its text and the lines of the original it came from (for
showing shared lines side by side). Source that does not parse has no normal form (None): the caller
falls back to plain tokens.
"""
from __future__ import annotations

import ast
import copy
import heapq
import re
from dataclasses import dataclass
from typing import Any, cast

# Module functions that are also tensor methods: `torch.softmax(x, -1)` is `x.softmax(-1)`.
TENSOR_FUNCTIONS = frozenset("""
softmax log_softmax matmul bmm transpose permute reshape view masked_fill masked_fill_ exp sum amax max
tril triu logical_not logical_and logical_or where unsqueeze squeeze flatten unflatten movedim chunk
split unbind to bool float sqrt rsqrt mean detach contiguous expand repeat_interleave
""".split())
INF = "INF"   # the one spelling of infinity
# Past these sizes the rewriting (quadratic in a block's length) is not tried and the caller compares
# plain tokens: a solution has about 1,000 nodes and blocks of tens of statements, while a hostile
# file of 10,000 definitions took minutes (tests/submissions/attacks/many_definitions_of_one_name.py).
MAX_NODES = 20_000
MAX_BLOCK = 300
CHEAP_NODES = 16   # a value repeated where it is read stays this small (`a = b + b` chains cannot double)


@dataclass(frozen=True)
class Statement:
    text: str                 # canonical source of the statement (a compound one: its header)
    lines: frozenset[int]     # lines of the original it stands for


def normal_form(source: str) -> list[Statement] | None:
    """The statements of `source` in normal form, in canonical order; None where it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = 0
    for node in ast.walk(tree):
        nodes += 1
        body = getattr(node, "body", None)
        if nodes > MAX_NODES or (isinstance(body, list) and len(body) > MAX_BLOCK):
            return None
    try:
        tree = _Canonical(_module_flags(tree)).visit(tree)
        tree.body = _prune(tree.body, module=True)
        _inline_helpers(tree)
        _drop_unread(tree)
        for node in ast.walk(tree):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                    setattr(node, field, _reorder(_inline(block)))
        tree = _Canonical({}).visit(tree)  # forms that joining lines brought together
        tree.body = _reorder(tree.body)
        out: list[Statement] = []
        _emit(tree.body, out)
        return out
    except (RecursionError, ValueError, TypeError, AttributeError):  # a tree this pass cannot rewrite
        return None


# --- dead code ---------------------------------------------------------------------------------

def _module_flags(tree: ast.Module) -> dict[str, Any]:
    """Module-level names bound once to a constant (DEBUG = False): a test on them is constant."""
    bound: dict[str, list] = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Name):
                bound.setdefault(t.id, []).append(node)
    flags = {}
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                and isinstance(stmt.value, ast.Constant) and len(bound[stmt.targets[0].id]) == 1):
            flags[stmt.targets[0].id] = stmt.value.value
    return flags


def _is_constant_test(test: ast.expr) -> bool | None:
    return bool(test.value) if isinstance(test, ast.Constant) else None


def _prune(block: list[ast.stmt], *, module: bool = False) -> list[ast.stmt]:
    """The block without dead statements, compound statements pruned inside."""
    out = []
    for stmt in block:
        if isinstance(stmt, (ast.Pass, ast.Assert, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal)):
            continue
        if isinstance(stmt, ast.Expr) and (isinstance(stmt.value, ast.Constant) or _is_print(stmt.value)):
            continue
        if module and isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant):
            continue  # a module-level flag or constant: its reads were given its value
        if isinstance(stmt, ast.If):
            constant = _is_constant_test(stmt.test)
            if constant is not None:
                out.extend(_prune(stmt.body if constant else stmt.orelse))
                continue
        if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
                and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.attr.endswith("_")
                and not stmt.value.func.attr.startswith("_")):
            # x.masked_fill_(m, v) as x = x.masked_fill(m, v): in place or not, the same step
            call = stmt.value
            func = cast(ast.Attribute, call.func)
            func.attr = func.attr[:-1]
            stmt = ast.copy_location(ast.Assign(targets=[ast.Name(id=cast(ast.Name, func.value).id, ctx=ast.Store())],
                                                value=call), stmt)
        unpacked = _unpacked(stmt)
        if unpacked is not None:
            out.extend(unpacked)
            continue
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                setattr(stmt, field, _prune(inner) or ([ast.Pass()] if field == "body" else []))
        if isinstance(stmt, ast.Try):
            for handler in stmt.handlers:
                handler.body = _prune(handler.body) or [ast.Pass()]
        out.append(stmt)
        if isinstance(stmt, (ast.Return, ast.Raise, ast.Continue, ast.Break)):
            break  # the rest of the block never runs
    return out


def _unpacked(stmt: ast.stmt) -> list[ast.stmt] | None:
    """`a, b = (f(a), g(b))` as `a = f(a)` then `b = g(b)`, and `a, b = [f(t) for t in X]` as
    `a, b = X` then `a = f(a)`, `b = f(b)`: one assignment per name, however it was packed; None
    where the statement is no such assignment (or the order would change what it means)."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], (ast.Tuple, ast.List))
            and all(isinstance(t, ast.Name) for t in stmt.targets[0].elts)):
        return None
    names = [cast(ast.Name, t).id for t in stmt.targets[0].elts]
    value = stmt.value

    def assign(name: str, expr: ast.expr) -> ast.stmt:
        return ast.copy_location(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=expr), stmt)
    if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(names):
        if any(set(_reads(e)) & set(names[:i]) for i, e in enumerate(value.elts)):
            return None
        return [assign(n, e) for n, e in zip(names, value.elts)]
    if (isinstance(value, (ast.ListComp, ast.GeneratorExp)) and len(value.generators) == 1
            and not value.generators[0].ifs and isinstance(value.generators[0].target, ast.Name)):
        loop = value.generators[0]
        if set(_reads(value.elt)) & set(names):
            return None
        first: ast.stmt = ast.copy_location(ast.Assign(targets=[stmt.targets[0]], value=loop.iter), stmt)
        target = cast(ast.Name, loop.target).id
        return [first] + [assign(n, _Substitute(target, ast.Name(id=n, ctx=ast.Load())).visit(
            copy.deepcopy(value.elt))) for n in names]
    return None


def _inline_helpers(tree: ast.Module) -> None:
    """A helper whose body is one `return EXPR` (a function, or a method called on `self`) is put
    where it is called, its parameters replaced by the call's arguments: a helper written out in
    place and one called read alike. A helper nothing calls any more is then dropped, if private."""
    helpers: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        for stmt in getattr(node, "body", ()) if isinstance(node, (ast.Module, ast.ClassDef)) else ():
            if (isinstance(stmt, ast.FunctionDef) and len(stmt.body) == 1 and isinstance(stmt.body[0], ast.Return)
                    and stmt.body[0].value is not None and not stmt.decorator_list and not stmt.args.vararg
                    and not stmt.args.kwarg and not stmt.args.kwonlyargs and not stmt.args.defaults
                    and len(list(ast.walk(stmt.body[0].value))) <= 4 * CHEAP_NODES):
                method = isinstance(node, ast.ClassDef)
                helpers[("self." if method else "") + stmt.name] = stmt
    if helpers:
        _CallInliner(helpers).visit(tree)


class _CallInliner(ast.NodeTransformer):
    def __init__(self, helpers: dict[str, ast.FunctionDef]):
        self.helpers = helpers

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        key = _key(node.func)
        helper = self.helpers.get(key) if key is not None else None
        if key is None or helper is None or node.keywords:
            return node
        params = [a.arg for a in helper.args.args][1 if key.startswith("self.") else 0:]
        if len(params) != len(node.args) or any(isinstance(a, ast.Starred) for a in node.args):
            return node
        body = copy.deepcopy(cast(ast.expr, cast(ast.Return, helper.body[0]).value))
        return ast.copy_location(_SubstituteAll(dict(zip(params, node.args))).visit(body), node)


class _SubstituteAll(ast.NodeTransformer):
    def __init__(self, values: dict[str, ast.expr]):
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self.values and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.values[node.id])
        return node


def _is_print(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"


def _key(node: ast.expr) -> str | None:
    """The name an assignment target or a read stands for: `x`, or `self.attr`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return "self." + node.attr
    return None


def _reads(tree: ast.AST) -> dict[str, int]:
    """How often each name (and `self.` attribute) is read in `tree`."""
    counts: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
            key = _key(node)
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
    return counts


def _drop_unread(tree: ast.Module) -> None:
    """Assignments to a name or `self.` attribute that nothing reads, repeatedly (one dropped may
    leave another unread)."""
    while True:
        reads = _reads(tree)
        dropped = False
        for node in ast.walk(tree):
            for field in ("body", "orelse"):
                block = getattr(node, field, None)
                if not (isinstance(block, list) and block and isinstance(block[0], ast.stmt)):
                    continue
                kept = [s for s in block if not _unread_assignment(s, reads, module=isinstance(node, ast.Module))]
                if len(kept) != len(block):
                    setattr(node, field, kept or [ast.Pass()])
                    dropped = True
        if not dropped:
            return


def _unread_assignment(stmt: ast.stmt, reads: dict[str, int], *, module: bool) -> bool:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        # a private helper nothing calls (a public function may be what an exercise asks for)
        dunder = stmt.name.startswith("__") and stmt.name.endswith("__")
        return (stmt.name.startswith("_") and not dunder and not stmt.decorator_list
                and reads.get(stmt.name, 0) == 0 and reads.get("self." + stmt.name, 0) == 0)
    if module or not isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        return False
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    keys = [_key(t) for t in targets]
    if any(k is None for k in keys):
        return False
    value = stmt.value
    if value is not None and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                 and n.func.attr.endswith("_") for n in ast.walk(value)):
        return False  # an in-place op has an effect even if its result is not read
    return all(reads.get(cast(str, k), 0) == 0 for k in keys)


# --- one form for equivalent ops ------------------------------------------------------------------

def _inf(node: ast.AST) -> bool:
    """float('inf'), math.inf, torch.inf, np.inf: infinity however it is spelt."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        arg = node.args[0]
        return isinstance(arg, ast.Constant) and str(arg.value).strip().lower() in ("inf", "infinity", "+inf")
    return isinstance(node, ast.Attribute) and node.attr == "inf"


def _minus_inf(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" and node.args:
        arg = node.args[0]
        return isinstance(arg, ast.Constant) and str(arg.value).strip().lower() in ("-inf", "-infinity")
    return isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _inf(node.operand)


def _number(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def _method(obj: ast.expr, name: str, args: list, keywords: list, like: ast.AST) -> ast.Call:
    return ast.copy_location(ast.Call(func=ast.Attribute(value=obj, attr=name, ctx=ast.Load()),
                                      args=args, keywords=keywords), like)


def _matmul(a: ast.expr, b: ast.expr, like: ast.AST) -> ast.BinOp:
    return ast.copy_location(ast.BinOp(left=a, op=ast.MatMult(), right=b), like)


_EINSUM_OPERANDS = re.compile(r"^\s*([\w.]+)\s*,\s*([\w.]+)\s*->\s*([\w.]*)\s*$")


class _Canonical(ast.NodeTransformer):
    """Rewrites equivalent spellings into one (bottom-up, so nested forms meet their canonical inner parts)."""

    def __init__(self, flags: dict[str, Any]):
        self.flags = flags
        self.modules: set[str] = set()

    def visit_Module(self, node: ast.Module) -> ast.AST:
        for n in ast.walk(node):  # names bound to modules, and functions imported from them
            if isinstance(n, ast.Import):
                self.modules.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.ImportFrom):
                self.modules.update(a.asname or a.name for a in n.names)
        self.modules.update(("torch", "F", "math", "np", "nn"))
        self.generic_visit(node)
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.flags:
            return ast.copy_location(ast.Constant(self.flags[node.id]), node)
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        if _minus_inf(node):
            return ast.copy_location(ast.Name(id="_NEG" + INF, ctx=ast.Load()), node)
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Compare):
            pass
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if node.attr == "mT" and isinstance(node.ctx, ast.Load):
            return _method(node.value, "transpose", [ast.Constant(-2), ast.Constant(-1)], [], node)
        if _inf(node):
            return ast.copy_location(ast.Name(id="_" + INF, ctx=ast.Load()), node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.MatMult):  # an einsum names its axes where a product transposes them
            node.left, node.right = _unshuffled(node.left), _unshuffled(node.right)
        # a * (1 / e) -> a / e;  a * e ** -0.5 -> a / e ** 0.5
        if isinstance(node.op, ast.Mult):
            for mine, other in ((node.right, node.left), (node.left, node.right)):
                if isinstance(mine, ast.BinOp) and isinstance(mine.op, ast.Div) and _number(mine.left) == 1.0:
                    return ast.copy_location(ast.BinOp(left=other, op=ast.Div(), right=mine.right), node)
                if isinstance(mine, ast.BinOp) and isinstance(mine.op, ast.Pow) and (_number(mine.right) or 0) < 0:
                    power = ast.BinOp(left=mine.left, op=ast.Pow(), right=ast.Constant(-cast(float, _number(mine.right))))
                    return ast.copy_location(ast.BinOp(left=other, op=ast.Div(), right=power), node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        # super(C, self).__init__() -> super().__init__()
        if isinstance(func, ast.Name) and func.id == "super":
            node.args = []
            return node
        if _minus_inf(node):
            return ast.copy_location(ast.Name(id="_NEG" + INF, ctx=ast.Load()), node)
        if _inf(node):
            return ast.copy_location(ast.Name(id="_" + INF, ctx=ast.Load()), node)
        # a function imported by name (from torch import matmul) reads as the module's
        if isinstance(func, ast.Name) and func.id in self.modules and func.id in TENSOR_FUNCTIONS | {"einsum",
                                                                                                   "sqrt"}:
            func = node.func = ast.Attribute(value=ast.Name(id="torch", ctx=ast.Load()), attr=func.id, ctx=ast.Load())
        if not isinstance(func, ast.Attribute):
            return node
        name = func.attr
        on_module = _dotted_root(func.value) in self.modules
        _positional_dim(node, method_args=len(node.args) - (1 if on_module else 0))
        keywords = node.keywords
        layer = _layer_weight(node.args[1]) if on_module and name == "linear" and len(node.args) >= 2 else None
        if layer is not None:  # F.linear(x, l.weight, l.bias) is l(x)
            return ast.copy_location(ast.Call(func=layer, args=[node.args[0]], keywords=[]), node)
        if on_module and name == "sqrt" and len(node.args) == 1:
            return ast.copy_location(ast.BinOp(left=node.args[0], op=ast.Pow(), right=ast.Constant(0.5)), node)
        if on_module and name == "einsum":
            return self._einsum(node)
        if on_module and name in TENSOR_FUNCTIONS and node.args:  # torch.f(x, ...) -> x.f(...)
            return self.visit_Call(_method(node.args[0], name, node.args[1:], keywords, node))
        if on_module:
            node.keywords = keywords
            return node
        obj = func.value
        if name in ("matmul", "bmm") and len(node.args) == 1:
            return _matmul(obj, node.args[0], node)
        if name in ("logical_and", "logical_or") and len(node.args) == 1:
            op = ast.BitAnd() if name == "logical_and" else ast.BitOr()
            return ast.copy_location(ast.BinOp(left=obj, op=op, right=node.args[0]), node)
        if name == "contiguous" and not node.args:
            return obj
        if name == "view":
            func.attr = name = "reshape"
        if name == "chunk":
            func.attr = name = "split"
            node.args = [ast.Name(id="_PARTS", ctx=ast.Load())] + node.args[1:]
        if name == "split" and node.args:
            node.args = [ast.Name(id="_PARTS", ctx=ast.Load())] + node.args[1:]
        if name == "logical_not" and not node.args:
            return ast.copy_location(ast.UnaryOp(op=ast.Invert(), operand=obj), node)
        if name == "size":
            shape = ast.Attribute(value=obj, attr="shape", ctx=ast.Load())
            if not node.args:
                return ast.copy_location(shape, node)
            return ast.copy_location(ast.Subscript(value=shape, slice=node.args[0], ctx=ast.Load()), node)
        if name == "transpose" and len(node.args) == 2:
            pair = sorted((_number(a) for a in node.args), key=lambda v: (v is None, v))
            if None not in pair:
                node.args = [ast.Constant(int(cast(float, v))) for v in pair]
        inner = _unshuffled(obj)
        if name in ("transpose", "permute") and isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.MatMult):
            return obj
        if name == "permute" and len(node.args) == 4 and [_number(a) for a in node.args] == [0, 2, 1, 3]:
            func.attr, node.args = "transpose", [ast.Constant(1), ast.Constant(2)]
        node.keywords = keywords
        return node

    def _einsum(self, node: ast.Call) -> ast.AST:
        """A two-operand einsum is a (batched) matrix product, whatever its axes."""
        if len(node.args) == 3 and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            if _EINSUM_OPERANDS.match(node.args[0].value):
                return _matmul(node.args[1], node.args[2], node)
        return node


def _layer_weight(node: ast.expr) -> ast.expr | None:
    """`layer` of `layer.weight`."""
    return node.value if isinstance(node, ast.Attribute) and node.attr == "weight" else None


def _unshuffled(node: ast.expr) -> ast.expr:
    """`node` without the transposes and permutes applied last: the axes' order, which an einsum
    writes in its subscripts and a product in transposes."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
           and node.func.attr in ("transpose", "permute")):
        node = node.func.value
    return node


def _dotted_root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _positional_dim(node: ast.Call, *, method_args: int) -> None:
    """`x.f(dim=-1)` is `x.f(-1)`: the one keyword most calls here take, written either way (only
    where it is the sole argument, so its place is known); other keywords in one order."""
    if method_args == 0 and len(node.keywords) == 1 and node.keywords[0].arg == "dim":
        node.args, node.keywords = node.args + [node.keywords[0].value], []
    node.keywords = sorted(node.keywords, key=lambda k: k.arg or "")


# --- split lines put back, independent statements in one order ---------------------------------------

def _stores(stmt: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(stmt):
        if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del)):
            key = _key(node)
            if key is not None:
                out.add(key)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _mutates(node.func.attr):
            key = _key(node.func.value)
            if key is not None:
                out.add(key)
    return out


_MUTATORS = frozenset("append extend insert update pop clear add remove setdefault".split())


def _mutates(method: str) -> bool:
    """An in-place method (`masked_fill_`, `list.append`): the object it is called on changes."""
    return method.endswith("_") and not method.startswith("_") or method in _MUTATORS


def _loads(stmt: ast.AST) -> set[str]:
    return set(_reads(stmt))


class _Facts:
    """What each statement of a block reads and assigns, computed once per statement (a statement
    rewritten in place is forgotten, and computed again when asked)."""

    def __init__(self):
        self.known: dict[int, tuple[ast.stmt, dict[str, int], set[str]]] = {}

    def _get(self, stmt: ast.stmt):
        entry = self.known.get(id(stmt))
        if entry is None or entry[0] is not stmt:
            entry = self.known[id(stmt)] = (stmt, _reads(stmt), _stores(stmt))
        return entry

    def reads(self, stmt: ast.stmt) -> dict[str, int]:
        return self._get(stmt)[1]

    def stores(self, stmt: ast.stmt) -> set[str]:
        return self._get(stmt)[2]

    def forget(self, stmt: ast.stmt) -> None:
        self.known.pop(id(stmt), None)


def _inline(block: list[ast.stmt]) -> list[ast.stmt]:
    """Puts a value assigned to a name and read once, later in the same block, where it is read,
    when nothing it reads changes in between."""
    block = list(block)
    facts = _Facts()
    changed = True
    while changed:
        changed = False
        for i, stmt in enumerate(block):
            if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
                continue
            name = stmt.targets[0].id
            needs = _loads(stmt.value)
            if _cheap(stmt.value) and _spread(block, i, name, needs, facts):
                changed = True
                break
            for j in range(i + 1, len(block)):
                later = block[j]
                uses = facts.reads(later).get(name, 0)
                if uses:
                    rest_uses = sum(facts.reads(s).get(name, 0) for s in block[j + 1:])
                    rebound_here = name in facts.stores(later) and not _compound(later)  # an `if` may not run
                    if (uses == 1 and (rest_uses == 0 or rebound_here) and not (facts.stores(later) - {name}) & needs
                            and _flat_use(later, name)):
                        facts.forget(later)
                        block[j] = _Substitute(name, stmt.value).visit(later)
                        _came_from(block[j], getattr(later, "lines", _span(later)) | getattr(stmt, "lines", _span(stmt)))
                        del block[i]
                        changed = True
                    break
                if name in facts.stores(later) or facts.stores(later) & needs:
                    break
            if changed:
                break
    return block


def _came_from(stmt: Any, lines) -> None:
    """Notes the source lines a statement made of others stands for (read back as `stmt.lines`)."""
    stmt.lines = lines


def _cheap(value: ast.expr) -> bool:
    """A value made of names, constants, attributes, subscripts and arithmetic: no call, so
    repeating it where it is read changes nothing (`hd = C // H`, `H = self.n_heads`)."""
    nodes = list(ast.walk(value))
    return len(nodes) <= CHEAP_NODES and not isinstance(value, ast.Tuple) and all(isinstance(n, (
        ast.Name, ast.Constant, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop,
        ast.expr_context, ast.Tuple, ast.Slice)) for n in nodes)


def _spread(block: list[ast.stmt], i: int, name: str, needs: set[str], facts: _Facts) -> bool:
    """Puts the cheap value of block[i] everywhere it is read in the rest of the block, when neither
    the name nor what the value reads is assigned again there; True when done (block[i] removed)."""
    rest = block[i + 1:]
    if any((name in facts.stores(s)) or (facts.stores(s) & needs) for s in rest):
        return False
    if not any(name in facts.reads(s) for s in rest):
        return False
    value = cast(ast.Assign, block[i]).value
    for j in range(i + 1, len(block)):
        if name in facts.reads(block[j]):
            lines = getattr(block[j], "lines", _span(block[j]))
            facts.forget(block[j])
            block[j] = _Substitute(name, value).visit(block[j])
            _came_from(block[j], lines | getattr(block[i], "lines", _span(block[i])))
    del block[i]
    return True


def _flat_use(stmt: ast.stmt, name: str) -> bool:
    """The read is not inside a loop or a function defined in `stmt` (it would run another number of times)."""
    if isinstance(stmt, (ast.For, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return False
    for node in ast.walk(stmt):
        if isinstance(node, (ast.For, ast.While, ast.FunctionDef, ast.Lambda, ast.comprehension)):
            if name in _reads(node):
                return False
    return True


class _Substitute(ast.NodeTransformer):
    def __init__(self, name: str, value: ast.expr):
        self.name, self.value = name, value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.value)
        return node


def _span(stmt: ast.stmt) -> frozenset[int]:
    first = getattr(stmt, "lineno", 0)
    return frozenset(range(first, (getattr(stmt, "end_lineno", None) or first) + 1)) if first else frozenset()


def _barrier(stmt: ast.stmt) -> bool:
    """A statement nothing moves across: a return, a call for its effect on something unnamed."""
    if isinstance(stmt, (ast.Return, ast.Raise, ast.Try, ast.With, ast.FunctionDef, ast.ClassDef, ast.Break,
                         ast.Continue, ast.AsyncFunctionDef)):
        return True
    return isinstance(stmt, ast.Expr) and not (isinstance(stmt.value, ast.Call) and isinstance(
        stmt.value.func, ast.Attribute) and _key(stmt.value.func.value) is not None)


def _reorder(block: list[ast.stmt]) -> list[ast.stmt]:
    """The block's statements in canonical order: among those whose inputs are ready, the one whose
    text comes first. Functions and classes keep their place relative to each other."""
    if len(block) < 2:
        return block
    texts = [_text(s) for s in block]
    stores = [_stores(s) for s in block]
    loads = [_loads(s) for s in block]
    after: list[set[int]] = [set() for _ in block]
    for j in range(len(block)):
        for i in range(j):
            if (_barrier(block[i]) or _barrier(block[j]) or stores[i] & loads[j] or stores[j] & (loads[i] | stores[i])):
                after[j].add(i)
    waiting = [len(a) for a in after]
    ready = [(texts[j], j) for j in range(len(block)) if not waiting[j]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(block[i])
        for j in range(len(block)):
            if i in after[j]:
                waiting[j] -= 1
                if not waiting[j]:
                    heapq.heappush(ready, (texts[j], j))
    return out


# --- text ---------------------------------------------------------------------------------------

class _Anonymous(ast.NodeTransformer):
    """Every name one symbol (so the text orders statements whatever the names), `self.` attributes too."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.startswith("_") and node.id.lstrip("_NEG") in (INF, "PARTS"):
            return node
        return ast.copy_location(ast.Name(id="v", ctx=node.ctx), node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "v" and _is_self(node):
            node.attr = "a"
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg, node.annotation = "v", None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.name, node.returns, node.decorator_list = "f", None, []
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.generic_visit(node)
        node.name = "C"
        return node


def _is_self(node: ast.Attribute) -> bool:
    return getattr(node, "_self", False)


class _MarkSelf(ast.NodeVisitor):
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            marked: Any = node  # an attribute of self: _Anonymous renames it too
            marked._self = True
        self.generic_visit(node)


def _header(stmt: ast.stmt) -> ast.stmt:
    """A compound statement with its blocks emptied: what is left is its header."""
    head = copy.copy(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        if hasattr(head, field):
            setattr(head, field, [ast.Pass()] if field == "body" else [])
    return head


def _text(stmt: ast.stmt) -> str:
    node = copy.deepcopy(_header(stmt) if _compound(stmt) else stmt)
    _MarkSelf().visit(node)
    node = _Anonymous().visit(node)
    ast.fix_missing_locations(node)
    text = ast.unparse(node)
    return text[:-len("pass")].rstrip() if _compound(stmt) and text.endswith("pass") else text


def _compound(stmt: ast.stmt) -> bool:
    return any(isinstance(getattr(stmt, f, None), list) for f in ("body", "orelse", "handlers"))


def _emit(block: list[ast.stmt], out: list[Statement]) -> None:
    stmt: Any  # a compound statement below: its blocks are read by name
    for stmt in block:
        lines = getattr(stmt, "lines", None) or _span(stmt)
        if not _compound(stmt):
            out.append(Statement(_text(stmt), frozenset(lines)))
            continue
        body_start = stmt.body[0].lineno if stmt.body and hasattr(stmt.body[0], "lineno") else stmt.lineno
        out.append(Statement(_text(stmt), frozenset(range(stmt.lineno, max(stmt.lineno, body_start - 1) + 1))))
        _emit(stmt.body, out)
        for handler in getattr(stmt, "handlers", ()):
            out.append(Statement("except " + (ast.unparse(handler.type) if handler.type else "") + ":",
                                 frozenset({handler.lineno})))
            _emit(handler.body, out)
        if getattr(stmt, "orelse", None):
            out.append(Statement("else:", frozenset()))
            _emit(stmt.orelse, out)
        if getattr(stmt, "finalbody", None):
            out.append(Statement("finally:", frozenset()))
            _emit(stmt.finalbody, out)
        out.append(Statement("end", frozenset()))
