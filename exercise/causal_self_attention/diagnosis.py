"""Behavioural diagnosis: which known mistake explains what this submission does.

It works on behaviour, never on the code's text (except to point at a line):
- outputs under the grader's weights, compared with the reference carrying each known mistake as a
  switch (`mistakes.py`), single mistakes first, then pairs;
- exceptions, recognised from their type and message;
- properties with their own probes: the parameter count across n_heads, randomness in eval and in
  training mode, gradients, a run on the meta device (a mask made on the CPU shows there without a
  GPU), the SDPA math backend, and calls to the attention built-ins the exercise forbids.
Where nothing matches, it says where the output is wrong and that no known mistake explains it.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

import torch

from exercise.causal_self_attention import mistakes, reference
from exercise.causal_self_attention.catalog import CATALOG
from exercise.causal_self_attention.checks import random_input
from sandbox.proxy import StudentCodeError, WorkerFailure

DIM, HEADS = 24, 4          # head_dim 6 != sqrt(24): scale mistakes stay apart; 4 heads show head bugs
FORBIDDEN = "torch.nn.functional.multi_head_attention_forward"
MATCH = {"atol": 1e-9, "rtol": 1e-7}
LINEAR = "torch.nn.modules.linear.Linear"


@dataclass(frozen=True)
class Finding:
    """One diagnosed mistake with the evidence from this submission."""
    id: str
    variant: str | None
    evidence: str

    def to_report(self) -> dict:
        info = CATALOG[self.id]
        return {"id": self.id, "variant": self.variant, "title": info.title,
                "explanation": info.explanation, "fix": info.fix, "evidence": self.evidence,
                "affects": list(info.affects), "advice": info.advice}


@dataclass
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    unexplained: str | None = None   # the output is wrong and no known mistake matches
    unchecked: str | None = None     # why the source could not be checked for forbidden built-ins
    skipped: list[str] = field(default_factory=list)  # probes that could not use the output

    def ids(self) -> set[str]:
        return {f.id for f in self.findings}

    def add(self, bug_id: str, variant: str | None, evidence: str) -> None:
        if bug_id not in self.ids():
            self.findings.append(Finding(bug_id, variant, evidence))


@dataclass(frozen=True)
class Probe:
    """One input the outputs are compared on."""
    x: torch.Tensor
    mask: torch.Tensor | None
    label: str

    @property
    def args(self) -> tuple:
        return (self.x,) if self.mask is None else (self.x, self.mask)


def probes() -> list[Probe]:
    x = random_input(2, 6, DIM, seed=901)
    x3 = random_input(3, 7, DIM, seed=902)
    return [Probe(x, None, "no mask"),
            Probe(x, reference.right_padding([6, 3], 6), "padding, real lengths [6, 3]"),
            Probe(x3, torch.ones(3, 7, dtype=torch.bool), "an all-True mask")]


def diagnose(student, source_lines: list[str], locate) -> Diagnosis:
    """Run every probe against the student's module; never raises for what the student's code does."""
    found = Diagnosis()
    for step in (_structure, _outputs, _autograd, _training_mode, _forbidden):
        try:
            step(student, found, source_lines, locate)
        except (StudentCodeError, WorkerFailure):
            continue  # the step's own evidence is missing; the tests report the failure itself
        except (RuntimeError, TypeError, ValueError, IndexError, ArithmeticError, MemoryError, RecursionError) as err:
            # An output of an odd shape or dtype that a probe could not digest: the tests grade it;
            # the diagnosis must never turn a student's mistake into a grader fault.
            found.skipped.append(f"{step.__name__.strip('_')}: {type(err).__name__}: {err}")
    if "params_depend_on_heads" in found.ids():  # per-head layers explain the wrong layout too
        found.findings = [f for f in found.findings if f.id != "wrong_layers"]
    return found


# -- structure ---------------------------------------------------------------------------------------
def _structure(student, found: Diagnosis, *_):
    counts = {h: student.new(DIM, h).n_params for h in (1, 2, 3, 4, 6, 8)}
    expected = 4 * DIM * DIM + 4 * DIM
    listed = ", ".join(f"n_heads={h}: {n}" for h, n in counts.items())
    if len(set(counts.values())) > 1:
        found.add("params_depend_on_heads", None,
                  f"at dim={DIM} your module has {listed} parameters; expected {expected} for every n_heads")
    module = student.new(DIM, HEADS)
    problems = []
    for name, weight, bias in (("qkv", (3 * DIM, DIM), (3 * DIM,)), ("proj", (DIM, DIM), (DIM,))):
        if name not in module.children or LINEAR not in module.children[name]:
            problems.append(f"no nn.Linear self.{name}")
        elif module.params.get(f"{name}.weight") != weight:
            problems.append(f"self.{name}.weight has shape {module.params.get(name + '.weight')}, expected {weight}")
        elif module.params.get(f"{name}.bias") != bias:
            problems.append(f"self.{name} has no bias")
    if problems:
        variant = "no_bias" if all(p.endswith("no bias") for p in problems) else "layout"
        layers = ", ".join(f"{k} {tuple(v)}" for k, v in list(module.params.items())[:6])
        found.add("wrong_layers", variant, "; ".join(problems) + f" (your parameters: {layers})")


# -- outputs -----------------------------------------------------------------------------------------
def _outputs(student, found: Diagnosis, source_lines, locate):
    module, weights = _module_with_grader_weights(student)
    cases = probes()
    try:
        outs = module.map([p.args for p in cases])
    except StudentCodeError as err:
        _exception(found, err)
        return
    again = module.map([cases[0].args])[0]
    if not _same(outs[0], again):
        found.add("nondeterministic_dropout", "active_in_eval",
                  f"two calls in eval mode with the same input differ by up to "
                  f"{(outs[0] - again).abs().nan_to_num(nan=0).max().item():.3g}")
        return
    _long_sequences(module, found)
    if all(_matches(out, weights, p, ()) for out, p in zip(outs, cases)):
        _sdpa_math(module, cases[1], found)
        return
    for combo in [(m,) for m in mistakes.SINGLES] + list(mistakes.PAIRS):
        if all(_matches(out, weights, p, combo) for out, p in zip(outs, cases)):
            for bug_id, variant in combo:
                found.add(bug_id, variant, _match_evidence(combo, outs, weights, cases))
            return
    found.unexplained = _where_wrong(outs, weights, cases)


def _module_with_grader_weights(student):
    module = student.new(DIM, HEADS, dtype="float64")
    weights = reference.random_weights(DIM, seed=777)
    module.set_params(weights)
    return module, weights


def _matches(out: torch.Tensor, weights, probe: Probe, combo) -> bool:
    """Equal to the reference with these mistakes; a row with no key left may be NaN (masked_fill)
    or zero attention (SDPA), as either correct style gives."""
    if tuple(out.shape) != tuple(probe.x.shape):
        return False
    return any(_same(out, mistakes.attention(weights, HEADS, probe.x, probe.mask, combo, empty_rows_zero=zero))
               for zero in (False, True))


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(torch.isclose(a.double(), b.double(), equal_nan=True, **MATCH).all())


def _match_evidence(combo, outs, weights, cases) -> str:
    names = " and ".join(f"{i} ({v})" for i, v in combo)
    # Show the probe where the output is furthest from the correct layer's.
    gaps = []
    for out, probe in zip(outs, cases):
        correct = reference.attention(weights, HEADS, probe.x, probe.mask)
        b, t = _worst(out, correct)
        gap = (out[b, t].double() - correct[b, t]).abs().nan_to_num(nan=float("inf")).max().item()
        gaps.append((gap, probe.label, b, t, out, correct))
    _, label, b, t, out, correct = max(gaps, key=lambda g: g[0])
    return (f"your output equals the reference with {names} on every probe (no mask, padding, all-True mask), "
            f"to 1e-9; e.g. with {label}, out[{b}, {t}, :3] = {_fmt(out[b, t, :3].tolist())} where the "
            f"correct layer gives {_fmt(correct[b, t, :3].tolist())}")


def _worst(got: torch.Tensor, want: torch.Tensor) -> tuple[int, int]:
    err = (got.double() - want).abs().nan_to_num(nan=float("inf")).amax(dim=2)    # (B, T)
    b, t = divmod(int(err.argmax()), err.shape[1])
    return b, t


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def _where_wrong(outs, weights, cases) -> str:
    parts = []
    for out, probe in zip(outs, cases):
        want = reference.attention(weights, HEADS, probe.x, probe.mask)
        if tuple(out.shape) != tuple(want.shape):
            parts.append(f"with {probe.label}: output shape {tuple(out.shape)}, expected {tuple(want.shape)}")
            continue
        bad = ~torch.isclose(out.double(), want, **MATCH).all(dim=2)           # (B, T)
        if not bad.any():
            continue
        positions = sorted(set(bad.nonzero()[:, 1].tolist()))
        err = (out.double() - want).abs().nan_to_num(nan=float("inf")).max().item()
        parts.append(f"with {probe.label}: positions {positions} differ (largest difference {err:.3g})")
    return ("the output is wrong and no mistake in the catalog (single or pair) reproduces it: "
            + "; ".join(parts))


def _long_sequences(module, found: Diagnosis):
    """A mask built for a fixed maximum length breaks on longer input."""
    try:
        module.map([(random_input(1, 40, DIM, seed=903),)])
    except StudentCodeError as err:
        found.add("fixed_max_length", None,
                  f"sequences of length 6 and 7 run, but length 40 raises {err.describe()}")


def _sdpa_math(module, padded: Probe, found: Diagnosis):
    """Code that is right only on the default CPU kernel: SDPA given both attn_mask and
    is_causal=True, or .view() on SDPA's output, whose memory layout differs between kernels."""
    try:
        module.map([padded.args], sdpa_backend="math")
    except StudentCodeError as err:
        forced = f"with PyTorch's math SDPA backend forced (as on other hardware), your forward raises {err.describe()}"
        if "is_causal" in err.message:
            found.add("sdpa_mask_and_is_causal", None, forced)
        elif "view size is not compatible" in err.message:
            found.add("view_without_contiguous", "only_on_the_default_kernel", forced)


EXCEPTIONS = [  # (text in the message, bug id, variant)
    ("view size is not compatible", "view_without_contiguous", None),
    ("Output 0 of Split", "breaks_autograd", "inplace_on_split_view"),
]


def _exception(found: Diagnosis, err: StudentCodeError):
    for text, bug_id, variant in EXCEPTIONS:
        if text in err.message:
            found.add(bug_id, variant, f"your forward raised {err.describe()}")
            return
    found.unexplained = (f"your forward raised {err.describe()}, and no mistake in the catalog "
                         f"explains this exception")


# -- properties --------------------------------------------------------------------------------------
AUTOGRAD_ERRORS = [
    ("does not require grad", "no_grad"),
    ("modified by an inplace operation", "inplace"),
    ("not have been used in the graph", "detached_input"),
]


def _autograd(student, found: Diagnosis, *_):
    if "nondeterministic_dropout" in found.ids():
        return  # random outputs make finite differences meaningless
    module = student.new(DIM, HEADS)
    x = random_input(2, 6, DIM, seed=904)
    cotangent = random_input(1, 2 * 6, DIM, seed=905).reshape(1, 2, 6, DIM)
    direction = random_input(2, 6, DIM, seed=906)
    eps = 1e-6
    plus, minus = module.map([(x + eps * direction,), (x - eps * direction,)])
    if plus.shape != x.shape or minus.shape != x.shape or not plus.is_floating_point():
        return  # the interface tests report the output's shape or dtype
    numeric = ((plus - minus) / (2 * eps) * cotangent[0]).sum().item()
    if torch.equal(plus, minus):
        return  # the output ignores the input: nothing for autograd to carry (the tests say so)
    try:
        grad = module.vjp(x, cotangents=cotangent)[0]
    except StudentCodeError as err:
        for text, variant in AUTOGRAD_ERRORS:
            if text in err.message:
                found.add("breaks_autograd", variant, f"a backward pass raised {err.describe()}")
        return
    from_autograd = (grad * direction).sum().item()
    if abs(numeric - from_autograd) > 1e-4 * max(1.0, abs(numeric)):
        found.add("breaks_autograd", "detached",
                  f"nudging the input changes the output at rate {numeric:.4g}, but the gradient your "
                  f"module reports gives {from_autograd:.4g}: part of forward is hidden from autograd")


def _training_mode(student, found: Diagnosis, *_):
    if "nondeterministic_dropout" in found.ids():
        return
    module = student.new(DIM, HEADS, train=True)
    x = random_input(2, 6, DIM, seed=907)
    first, second = module.map([(x,), (x,)])
    if not _same(first, second):
        found.add("nondeterministic_dropout", "training_mode",
                  f"in training mode two calls with the same input differ by up to "
                  f"{(first - second).abs().nan_to_num(nan=0).max().item():.3g}; in eval mode they agree")


def device_advice(student) -> Finding | None:
    """Run last (see test_07_advice.py): the meta device makes torch import torch._dynamo, which
    the worker has been importing in the background while the tests ran."""
    found = Diagnosis()
    try:
        _devices(student, found)
    except (StudentCodeError, WorkerFailure, RuntimeError, TypeError, ValueError):
        return None
    return found.findings[0] if found.findings else None


def _devices(student, found: Diagnosis, *_):
    module = student.new(DIM, HEADS)
    x = random_input(2, 6, DIM, seed=908)
    for args in ((x,), (x, reference.right_padding([6, 3], 6))):
        try:
            module.shape_on("meta", *args)
        except StudentCodeError as err:
            if "device" in err.message and ("cpu" in err.message or "same device" in err.message):
                found.add("mask_device_mismatch", None,
                          f"with the module and its input on PyTorch's meta device (a stand-in for a GPU), "
                          f"forward raised {err.describe()}")
            return


FORBIDDEN_NAMES = ("MultiheadAttention", "multi_head_attention_forward", "_native_multi_head_attention")


def _forbidden(student, found: Diagnosis, source_lines, locate):
    """Two signs, either enough: the class's own code names a forbidden built-in (read by the
    harness, so the student cannot hide it at run time), or the worker counted a call to it."""
    try:
        line = _line_naming(source_lines, FORBIDDEN_NAMES, inside_class=student.entry.class_name)
    except (MemoryError, RecursionError) as err:  # the harness's own limits stopped the scan
        found.unchecked = (f"reading your source for them ran into the grader's own "
                           f"{'memory' if isinstance(err, MemoryError) else 'recursion'} limit")
        return
    if line is not None:
        found.add("uses_forbidden_builtin", None, f"your class uses it at {locate(line)}")
        return
    calls = student.calls_to_watched().get(FORBIDDEN, 0)
    if calls:
        found.add("uses_forbidden_builtin", None, f"F.multi_head_attention_forward ran {calls} times during the probes")


def _line_naming(source_lines: list[str], names, *, inside_class: str) -> int | None:
    """The first line of the code `class inside_class` can reach that names one of `names`: the
    class itself, and the module-level functions, classes and assignments it refers to, followed
    from name to name. A self-test elsewhere in the file may compare with nn.MultiheadAttention:
    that is allowed, as long as the class does not reach it."""
    try:
        tree = ast.parse("\n".join(source_lines))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    defined: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defined.setdefault(name.id, []).append(node)
    todo = list(defined.get(inside_class, []))
    seen: set[int] = set()
    hits = []
    while todo:
        top = todo.pop()
        if id(top) in seen:
            continue
        seen.add(id(top))
        for node in ast.walk(top):
            named = getattr(node, "attr", None) or getattr(node, "id", None)
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = node.value  # getattr(F, "multi_head_attention_forward")
            if named in names:
                hits.append(node.lineno)
            if isinstance(node, ast.Name):
                todo += defined.get(node.id, [])
    return min(hits) if hits else None

