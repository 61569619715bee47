"""The shapes the tests run over and comparisons that explain themselves: each returns None when
the answer is right, or a got / expected description a student can act on."""
from __future__ import annotations

import itertools

import torch

# Measured with bench/measure_head_tolerances.py over every correct style in
# tests/submissions/head/correct against the float64 reference: the worst correct float32 answer
# was ~5e-7 off (out and weights), the worst float64 one ~9e-16. The bounds leave one to six orders
# of magnitude of room and sit far below the smallest error of a known mistake (~3e-3: masked
# scores set to -10). A weight that a finite fill leaves above the diagonal (-1e9, finfo.min, even
# -30 in float64) is within them: not a mistake.
TOLERANCE = {"float32": {"atol": 1e-5, "rtol": 1e-4}, "float64": {"atol": 1e-9, "rtol": 1e-7}}
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
    lines.append(f"positions that differ: {ranges(bad.any(dim=(0, 2)).nonzero().flatten().tolist())} "
                 f"of 0..{g.shape[1] - 1}")
    shown = min(4, g.shape[2])
    lines.append(f"largest difference {err.max().item():.3g} at {what}[{b}, {t}, {c}]")
    lines.append(f"got      {what}[{b}, {t}, :{shown}] = {vector(g[b, t, :shown])}")
    lines.append(f"expected {what}[{b}, {t}, :{shown}] = {vector(e[b, t, :shown])}")
    return "\n".join(lines)


def vector(v: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(a):.4f}" for a in v) + "]"


def ranges(values: list[int]) -> str:
    """[0, 1, 2, 5] -> '0..2, 5'"""
    runs = [[v for _, v in run] for _, run in itertools.groupby(enumerate(values), lambda p: p[1] - p[0])]
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs) or "none"


def first_failures(failures: list[tuple[str, str]]) -> str:
    """The first failing case in full, and the next few by name."""
    case, problem = failures[0]
    others = "".join(f"\nalso wrong: {c}" for c, _ in failures[1:4])
    more = f"\n(and {len(failures) - 4} more cases)" if len(failures) > 4 else ""
    return f"case: {case}\n{problem}{others}{more}"
