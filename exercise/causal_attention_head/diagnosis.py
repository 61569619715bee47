"""Behavioural diagnosis: which known mistake explains what this submission returns.

On behaviour only: the student's (out, weights) on a few probes, compared with the hand-written
reference carrying each known mistake as a switch (mistakes.py); the two mistakes with a free
parameter get it read off the student's weights (the factor the scores are scaled by, the number
masked scores are set to). A model must reproduce every probe where the answers are wrong (a
mistake taken only at some shapes is right at the others, and the evidence says where it shows); a
wrongly scaled output is fitted apart from the weights. A name is given only when exactly one
mistake fits. Besides: calls to the forbidden built-ins (counted by
the sandbox, so no text trick hides them) and a backward pass that raises or is cut, recognised by
what it did.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from exercise.causal_attention_head import mistakes, reference
from exercise.causal_attention_head.catalog import CATALOG
from exercise.causal_attention_head.checks import Tolerance, ranges, vector
from sandbox.failures import StudentCodeError, WorkerFailure

# (B, T, d_k): d_k all different and none 1 (sqrt(d_k), d_k and 1 stay apart, so a fitted scale
# has one name), T from 5 to 40 (every probe has rows with a past and a future), B = 1 and more.
PROBES = [(2, 6, 4), (3, 9, 6), (1, 12, 9), (2, 5, 16), (1, 40, 3)]
# A model matches the student's answers to these bounds: three orders of magnitude above float32
# rounding (a function that computes in float32 inside still matches), and far below the smallest
# difference between two mistakes (about 1e-2). What the tests call wrong is stricter (checks.py).
MATCH: Tolerance = {"atol": 1e-6, "rtol": 1e-5}
SCALES = {  # the factor the raw scores q k^T are multiplied by -> what the code most likely does
    "none": lambda d, T: 1.0, "head_dim_not_sqrt": lambda d, T: 1 / d, "multiplied": lambda d, T: math.sqrt(d),
    "sqrt_seq_len": lambda d, T: 1 / math.sqrt(T),
}


@dataclass
class Diagnosis:
    findings: list[dict] = field(default_factory=list)   # report entries: id, variant, title, ... evidence
    unexplained: str | None = None   # the answers are wrong and no single known mistake explains them
    skipped: list[str] = field(default_factory=list)     # steps that could not use the answers

    def ids(self) -> set[str]:
        return {f["id"] for f in self.findings}

    def add(self, bug_id: str, variant: str | None, evidence: str) -> None:
        if bug_id not in self.ids():
            self.findings.append(CATALOG[bug_id].finding(bug_id, variant, evidence))


def diagnose(student) -> Diagnosis:
    """Before the tests: calls to the forbidden built-ins (the comparison tests need the answer)."""
    found = Diagnosis()
    _run(found, (forbidden,), student)
    return found


def complete(found: Diagnosis, student, *, failed: bool) -> None:
    """After the tests, only when one failed (a correct submission pays for nothing)."""
    if failed:
        _run(found, (forbidden, _answers, _autograd), student)


def _run(found: Diagnosis, steps, student) -> None:
    for step in steps:
        try:
            step(student, found)
        except (StudentCodeError, WorkerFailure):
            continue  # the step's own evidence is missing; the tests report the failure itself
        except (RuntimeError, TypeError, ValueError, IndexError, ArithmeticError, MemoryError) as err:
            # answers of an odd shape or dtype that a step could not digest: the tests grade them
            found.skipped.append(f"{step.__name__.strip('_')}: {type(err).__name__}: {err}")


def forbidden(student, found: Diagnosis) -> None:
    """What the workers refused so far (every call of every test; sandbox/audit.py)."""
    from sandbox.audit import describe_refusals
    evidence = describe_refusals(student.calls_to_watched())
    if evidence:
        found.add("uses_forbidden_builtin", None, evidence)


def _answers(student, found: Diagnosis) -> None:
    if "uses_forbidden_builtin" in found.ids():
        return  # its answers are PyTorch's (or the refusal), not the student's
    inputs = [reference.random_qkv(B, T, d, seed=900 + i) for i, (B, T, d) in enumerate(PROBES)]
    try:
        answers = [(o.double(), w.double()) for o, w in student.function().map(inputs)]
    except StudentCodeError as err:
        found.unexplained = f"your function raised {err.describe()}, and no mistake in the catalog explains it"
        return
    for (q, _k, v), (out, weights) in zip(inputs, answers):
        if tuple(out.shape) != tuple(v.shape) or tuple(weights.shape) != (*q.shape[:2], q.shape[1]):
            # the interface test says what the shapes are; no model of the values applies
            found.unexplained = (f"for q, k, v of shape {tuple(q.shape)} your function returns a "
                                 f"{tuple(out.shape)} tensor, then a {tuple(weights.shape)} one, where out "
                                 f"{tuple(v.shape)} comes first and weights {(*q.shape[:2], q.shape[1])} "
                                 f"second; no mistake in the catalog explains it")
            return
    correct = [reference.attention(*x) for x in inputs]
    wrong = [i for i, (a, c) in enumerate(zip(answers, correct)) if not _same(a, c)]
    if not wrong:
        return  # right on every probe: what failed is not a mistake of the values
    # A mistake may show at some shapes only (a branch on T or B): a model must reproduce every probe
    # where the answers are wrong; where they are right, the mistake was not taken (said in the evidence).
    fits: list[tuple[mistakes.Mistake, dict[int, tuple[float, float] | None] | None]] = [(m, None) for m in mistakes.SINGLES
            if all(_same(answers[i], mistakes.attention(*inputs[i], m)) for i in wrong)]
    for mistake in mistakes.FITTED:
        fitted = {i: _fit(mistake, inputs[i], answers[i]) for i in wrong}   # fitted only where it shows
        if all(v is not None for v in fitted.values()):
            fits.append((mistake, fitted))
    named = {m[0] for m, _ in fits}
    if len(named) == 1:
        (bug, variant), values = fits[0]
        found.add(bug, _variant(bug, variant, values), _evidence(fits[0], inputs, answers, wrong))
    elif named:
        found.unexplained = (f"your answers are wrong, and {' and '.join(sorted(named))} reproduce them alike on "
                             f"every probe where they are wrong, so the grader cannot tell which mistake it is")
    else:
        described = [_where_wrong(inputs[i], answers[i]) for i in wrong]
        found.unexplained = "your answers are wrong and no mistake in the catalog reproduces them: " + "; ".join(
            described[:3]) + (f"; and {len(described) - 3} more probes" if len(described) > 3 else "")


def _same(answer, expected) -> bool:
    return all(tuple(a.shape) == tuple(e.shape) and bool(torch.isclose(a, e, equal_nan=True, **MATCH).all())
               for a, e in zip(answer, expected))


def _fit(mistake, qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor], answer) -> tuple[float, float] | None:
    """(value, output factor) with which the mistake reproduces this answer, or None. The value is
    read off the weights (_read); the output is then fitted on its own where the mistake can touch it
    apart from the weights: a scale is sometimes put on the output too (or instead), so for wrong
    scaled weights, out = factor * (weights @ v) with a factor read off the output by least squares."""
    value = _read(mistake, qkv, answer[1])
    if value is None:
        return None
    model = mistakes.attention(*qkv, mistake, value)
    if _same(answer, model):
        return value, 1.0
    if mistake != ("wrong_scale", "factor") or not _same(answer[1:], model[1:]) or _same(
            answer[1:], reference.attention(*qkv)[1:]):
        return None   # the weights must be the wrongly scaled ones themselves
    out, expected = answer[0], model[0]
    factor = float((out * expected).sum() / (expected * expected).sum())
    if not math.isfinite(factor) or not _same((out,), (factor * expected,)):
        return None
    return value, factor


def _read(mistake, qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor], weights: torch.Tensor) -> float | None:
    """The mistake's parameter read off the student's weights (B, T, T), where the log of a weight
    is linear in it: within a row, log w[t, s] - log w[t, 0] is factor * (r[t, s] - r[t, 0]) for the
    raw scores r = q k^T, and, for a future key s > t, value - r[t, 0] / sqrt(d_k)."""
    q, k, _ = (t.double() for t in qkv)
    T, d_k = q.shape[1], q.shape[2]
    raw = q @ k.transpose(-2, -1)
    logs = weights.log() - weights[..., :1].log()                                    # (B, T, T)
    keys = torch.arange(T)
    if mistake == ("wrong_scale", "factor"):
        where = (keys[None, :] <= keys[:, None]) & (keys[None, :] > 0)                 # past keys but key 0
        x, y = (raw - raw[..., :1])[:, where], logs[:, where]
        ok = torch.isfinite(y)
        x, y = x[ok], y[ok]
        value = float((x * y).sum() / (x * x).sum()) if len(x) else float("nan")
    else:
        where = keys[None, :] > keys[:, None]                                          # future keys
        y = (logs + raw[..., :1] / math.sqrt(d_k))[:, where]
        y = y[torch.isfinite(y)]
        value = float(y.mean()) if len(y) else float("nan")
    return value if math.isfinite(value) else None


def _variant(bug: str, variant: str, values: dict | None) -> str:
    """A fitted scale gets the name of the formula it equals at every probe it was fitted at, if any."""
    if (bug, variant) != ("wrong_scale", "factor"):
        return variant
    assert values is not None  # a fitted mistake comes with its values
    for name, formula in SCALES.items():
        if all(math.isclose(v, formula(PROBES[i][2], PROBES[i][1]), rel_tol=1e-4) for i, (v, _) in values.items()):
            return name
    return "constant" if len({round(v, 6) for v, _ in values.values()}) == 1 else "other"


def _evidence(fit, inputs, answers, wrong: list[int]) -> str:
    (bug, variant), values = fit
    fitted = ""
    if values:
        what = "the scores q k^T are multiplied by" if bug == "wrong_scale" else "masked scores are set to"
        fitted = f"; read off your weights, {what} " + ", ".join(
            f"{v:.6g} at d_k={PROBES[i][2]}" + (f" (expected 1/sqrt(d_k) = {1 / math.sqrt(PROBES[i][2]):.6g})"
                                                 if bug == "wrong_scale" else "")
            for i, (v, _) in values.items())
        scaled = [(i, f) for i, (_, f) in values.items() if not math.isclose(f, 1.0, rel_tol=1e-6)]
        if scaled:
            fitted += "; and read off your output, out is weights @ v multiplied by " + ", ".join(
                f"{f:.6g} at d_k={PROBES[i][2]}" for i, f in scaled)
    i = wrong[0]
    (q, k, v), (_, weights) = inputs[i], answers[i]
    _, right = reference.attention(q, k, v)
    t = int((weights - right).abs().nan_to_num(nan=float("inf")).amax(dim=(0, 2)).argmax())
    B, T, d_k = q.shape
    return (f"your answers equal the reference with {bug} ({variant}) on every probe where they are wrong, to "
            f"1e-6{fitted}{_where_it_shows(wrong)}; e.g. with B={B}, T={T}, d_k={d_k}, "
            f"weights[0, {t}, :4] = {vector(weights[0, t, :4])} where the correct weights are "
            f"{vector(right[0, t, :4])}")


def _where_it_shows(wrong: list[int]) -> str:
    """'' when the answers are wrong at every probe; else what the probes where the mistake shows
    have in common (T, B or d_k past a bound), and the ones where the answers are right: the code
    takes the mistake's branch only at some shapes (a fitted model has no value at the others)."""
    if len(wrong) == len(PROBES):
        return ""

    def shape(i: int) -> str:
        return "({}, {}, {})".format(*PROBES[i])
    right = [i for i in range(len(PROBES)) if i not in wrong]
    limits = []
    for name, axis in (("T", 1), ("B", 0), ("d_k", 2)):
        seen, fine = {PROBES[i][axis] for i in wrong}, {PROBES[i][axis] for i in right}
        if min(seen) > max(fine):
            limits.append(f"{name} > {max(fine)}")
        elif max(seen) < min(fine):
            limits.append(f"{name} < {min(fine)}")
    where = limits[0] if limits else "(B, T, d_k) = " + ", ".join(shape(i) for i in wrong)
    if len(limits) > 1:   # each alone separates the probes: say so rather than pick one
        where += f" (or equally {' or '.join(limits[1:])}: the probes do not tell them apart)"
    return (f" (it shows only where {where}: at (B, T, d_k) = {', '.join(shape(i) for i in right)} your answers "
            f"are right)")


def _where_wrong(qkv, answer) -> str:
    B, T, d_k = qkv[0].shape
    parts = []
    for name, got, want in zip(("out", "weights"), answer, reference.attention(*qkv)):
        bad = ~torch.isclose(got, want, **MATCH).all(dim=2).any(dim=0)              # (T,)
        if bad.any():
            parts.append(f"{name} differs at positions {ranges(bad.nonzero().flatten().tolist())}")
    return f"with B={B}, T={T}, d_k={d_k}: " + ", ".join(parts)


def _autograd(student, found: Diagnosis) -> None:
    """What happens when autograd is asked for the gradient with respect to an input the forward
    itself shows the output depends on (an output that ignores v has no gradient to give for it):
    the request raises (an in-place change of the input or of a tensor backward needs, a round trip
    through NumPy, a graph cut so the input is not in it), or the gradient is exactly zero (a graph
    cut under no_grad or detach). Recognised by what happened, not by the message's words; the
    forward on the same inputs has just run, so it is the backward that fails. An input changed in
    place (compared after one more call) is said to be the cause."""
    q, k, v = reference.random_qkv(*PROBES[0], seed=950)
    cotangent = reference.random_qkv(*PROBES[0], seed=951)[0]
    fn = student.function()
    nudged = [[q, k, v] for _ in range(3)]
    for wrt in range(3):
        nudged[wrt][wrt] = nudged[wrt][wrt] + 1e-3 * reference.random_qkv(*PROBES[0], seed=952 + wrt)[0]
    base, *moved = (o.double() for o, _ in fn.map([(q, k, v), *map(tuple, nudged)]))
    if tuple(base.shape) != tuple(v.shape):
        return  # not out first (the interface test says so): a backward through it tells nothing
    happened = {}   # input -> what the backward did: "raised ...", "zero", or "works"
    for wrt, name in enumerate("qkv"):
        if not (moved[wrt] - base).abs().nan_to_num().max() > 1e-9:
            continue
        try:
            grads = fn.vjp(q, k, v, cotangents=[cotangent], wrt=wrt, output=0)
        except StudentCodeError as err:
            happened[name] = f"raised {err.describe()}"
            continue
        # exact zeros: a NaN gradient (from NaN answers) tells nothing
        happened[name] = "zero" if bool((grads == 0).all()) else "works"
    broken = {name: what for name, what in happened.items() if what != "works"}
    if not broken:
        return
    fine = [name for name, what in happened.items() if what == "works"]
    also = f" (with respect to {' and '.join(fine)} it works)" if fine else ""
    name, what = next(iter(broken.items()))
    changed = [n for i, n in enumerate("qkv") if i in fn.changed_inputs(q, k, v)]   # the input after the call
    if changed:
        found.add("breaks_autograd", "inplace_on_input",
                  f"your function changes its input {' and '.join(changed)} in place (the caller's tensor: "
                  f"compared after the call), and a backward pass with respect to {name} "
                  f"{'gives zero' if what == 'zero' else 'fails'}{also}" + ("" if what == "zero" else f": it {what}"))
    elif what == "zero":
        found.add("breaks_autograd", "detached",
                  f"changing {name} changes your output, but autograd says it depends on {name} "
                  f"nowhere: the graph is cut (torch.no_grad(), .detach(), .data){also}")
    else:
        found.add("breaks_autograd", "backward_fails",
                  f"your function runs, and changing {name} changes its output, but a backward pass with "
                  f"respect to {name} fails{also}: it {what}")
