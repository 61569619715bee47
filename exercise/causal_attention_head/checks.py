"""The shapes the tests run over and comparisons that explain themselves: each returns None when
the answer is right, or a got / expected description a student can act on."""
from __future__ import annotations

import math
from typing import TypedDict

import pytest
import torch

from sandbox.kit import differs, positions_differing, ranges, read_matrix, softmax_fit, values_needed


class Tolerance(TypedDict):
    """torch.isclose's bounds, passed as its keywords."""
    atol: float
    rtol: float


# Measured with bench/measure_head_tolerances.py over every correct style in
# tests/submissions/head/correct against the float64 reference: the worst correct float32 answer
# was ~5e-7 off (out and weights), the worst float64 one ~9e-16. The bounds leave one to six orders
# of magnitude of room and sit far below the smallest error of a known mistake (~3e-3: masked
# scores set to -10). A weight that a finite fill leaves above the diagonal (-1e9, finfo.min, even
# -30 in float64) is within them: not a mistake.
TOLERANCE: dict[str, Tolerance] = {"float32": {"atol": 1e-5, "rtol": 1e-4}, "float64": {"atol": 1e-9, "rtol": 1e-7}}
DTYPES = ("float32", "float64")

# (B, T, d_k): one sequence and three, T = 1 (a single key) and 2, T past 8 and 16 (where a cached
# mask may end) up to 40, d_k = 1 (the scale is 1: scale mistakes vanish there, so other d_k
# follow) and d_k = 4, 6, 16 (sqrt(d_k) and d_k apart).
CASES = [(1, 1, 1), (2, 1, 5), (3, 2, 4), (1, 9, 1), (2, 7, 3), (3, 17, 6), (1, 40, 16), (3, 40, 1)]


def describe(q: torch.Tensor, dtype: str) -> str:
    B, T, d_k = q.shape
    return f"B={B}, T={T}, d_k={d_k}, {dtype}"


def compare(got: torch.Tensor, expected: torch.Tensor, *, what: str, dtype: str) -> str | None:
    """Compare a student's `out` (B, T, d_k) or `weights` (B, T, T) with the reference; None when
    every entry matches to the dtype's tolerance (NaN never does)."""
    if tuple(got.shape) != tuple(expected.shape):
        return f"{what} shape: got {tuple(got.shape)}, expected {tuple(expected.shape)}"
    g, e = got.double(), expected.double()
    bad = ~torch.isclose(g, e, **TOLERANCE[dtype])
    if not bad.any():
        return None
    err = (g - e).abs().nan_to_num(nan=float("inf"))
    b, t, c = (int(i) for i in torch.nonzero(err == err.max())[0])
    lines = []
    nan_rows = torch.isnan(g).any(dim=(0, 2)).nonzero().flatten().tolist()
    if nan_rows:
        lines.append(f"your {what} has NaN at position(s) {ranges(nan_rows)}")
    lines.append(positions_differing(bad.any(dim=(0, 2)).nonzero().flatten().tolist(), g.shape[1]))
    shown = min(4, g.shape[2])
    lines.append(f"largest difference {err.max().item():.3g} at {what}[{b}, {t}, {c}]")
    lines.append(f"got      {what}[{b}, {t}, :{shown}] = {vector(g[b, t, :shown])}")
    lines.append(f"expected {what}[{b}, {t}, :{shown}] = {vector(e[b, t, :shown])}")
    return "\n".join(lines)


def vector(v: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(a):.4f}" for a in v) + "]"


def first_failures(failures: list[tuple[str, str]]) -> str:
    """The first failing case in full, and the next few by name."""
    case, problem = failures[0]
    others = "".join(f"\nalso wrong: {c}" for c, _ in failures[1:4])
    more = f"\n(and {len(failures) - 4} more cases)" if len(failures) > 4 else ""
    return f"case: {case}\n{problem}{others}{more}"


def drawn_qkv(draws, label, dtype: str, cases=CASES) -> list[tuple]:
    """q, k, v for each shape of `cases` in an order drawn for `label`, each standard normal, all
    from the grade's seed (sandbox.kit.Draws)."""
    return [tuple(draws.normal(B, T, d_k, label=(label, i, name), dtype=dtype) for name in "qkv")
            for i, (B, T, d_k) in enumerate(draws.shuffled(cases, label))]


# How far a read-out may be off: the worst correct float32 answer is ~5e-7 off, float64 ~1e-15.
READ_OUT = {"float32": 2e-4, "float64": 1e-7}


def answers_and_gate(student, draws, inputs: list, dtype: str, label) -> tuple[list, str | None]:
    """The function's (out, weights) on `inputs`, and None when it did attention's job on them,
    else why not. Each test gates its own inputs, so no input is a probe apart from the scored
    ones. The property points are worth nothing without it: weights = torch.eye(T) have rows that
    sum to 1, zeros above the diagonal and are causal, and so is a running mean of v. So, read out
    of the outputs alone: with the test's v and more values the grader draws (enough to span
    every position), out must be A @ v for one matrix A whatever v is; the weights returned must
    be that A; and A must be a softmax of c * q . k over the keys it uses (sandbox.kit), for q, k
    computed here. A scale mistake is still attention; weights that do not follow q . k are not."""
    calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    spans: list[tuple[int, int]] = []
    for i, (q, k, v) in enumerate(inputs):
        B, T, d_k = q.shape
        extra = [draws.normal(B, T, d_k, label=(label, "values", i, j), dtype=dtype)
                 for j in range(1, values_needed(T, d_k))]
        spans.append((len(calls), len(extra) + 1))
        calls += [(q, k, v)] + [(q, k, e) for e in extra]
    # the test's own calls and the read-out's, in one drawn order: none is recognisable by its place
    order = draws.shuffled(list(range(len(calls))), label, "calls")
    got = student.function().map([calls[i] for i in order])
    answers = [None] * len(calls)
    for place, i in enumerate(order):
        answers[i] = got[place]
    problem = None
    for (start, n), (q, k, _v) in zip(spans, inputs):
        problem = _not_attention(answers[start:start + n], [c[2] for c in calls[start:start + n]], q, k, dtype)
        if problem:
            B, T, d_k = q.shape
            problem = f"with B={B}, T={T}, d_k={d_k}, {dtype}: {problem}"
            break
    return [answers[start] for start, _ in spans], problem


def _not_attention(answers: list, values: list, q, k, dtype: str) -> str | None:
    B, T, d_k = q.shape
    for out, w in answers:
        if tuple(out.shape) != (B, T, d_k) or tuple(w.shape) != (B, T, T):
            return f"it returns shapes {tuple(out.shape)} and {tuple(w.shape)} for inputs of shape {(B, T, d_k)}"
    if not all(torch.isfinite(out).all() and torch.isfinite(w).all() for out, w in answers):
        return "its answers hold NaN or infinity for ordinary inputs"
    A, residual = read_matrix(values, [out for out, _ in answers])
    scale = max(max(float(out.double().abs().max()) for out, _ in answers), 1.0)
    if (residual > READ_OUT[dtype] * scale).any():
        return ("its output is not weights @ v for one set of weights: changing only v changes the "
                "weights its output is made with")
    for _, w in answers:
        if differs(w, A, atol=READ_OUT[dtype], rtol=1e-3).any():
            return "the weights it returns are not the weights its output is computed with (out = weights @ v)"
    scores = q.double() @ k.double().transpose(-2, -1) / math.sqrt(d_k)
    return softmax_fit(A, scores, torch.ones(T, T, dtype=torch.bool).tril(), atol=READ_OUT[dtype])


def require_attention(problem: str | None) -> None:
    """Fail a property test when the function does not do attention's job on the test's inputs."""
    if problem:
        pytest.fail(f"no points for this property: your function does not do attention's job "
                    f"({problem}). Row sums, zeros above the diagonal and causality only count "
                    f"for weights computed from the queries and the keys.")
