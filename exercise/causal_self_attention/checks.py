"""Comparisons that explain themselves: each returns None when the output is right, or a
got / expected description a student can act on."""
from __future__ import annotations

from typing import TypedDict

import torch

from exercise.causal_self_attention import reference
from sandbox import kit


class Tolerance(TypedDict):
    """torch.isclose's bounds, passed as its keywords."""
    atol: float
    rtol: float


# Chosen from measurements (bench/measure_tolerances.py over every correct style in the project's
# corpus, float64 reference): the worst correct float32 output was ~2e-7 off, the worst float64
# output ~4e-16. The bounds leave two to four orders of magnitude of room, and still sit far below
# the smallest error of any known mistake (about 1e-2).
TOLERANCE: dict[str, Tolerance] = {"float32": {"atol": 1e-5, "rtol": 1e-4}, "float64": {"atol": 1e-9, "rtol": 1e-7}}
DTYPES = {"float32": torch.float32, "float64": torch.float64}

# The shape matrix every scored property runs over. (dim, n_heads): one head (head bugs vanish, fast
# paths for one head show), 2, 3, 4 and 8 heads, and head_dim 1 (8 heads of dim 8). dim = 24 with
# 4 heads keeps sqrt(dim) != head_dim, so scale mistakes stay apart.
SHAPES = [(8, 1), (8, 2), (12, 3), (24, 4), (32, 8), (8, 8)]
SHAPE_IDS = [f"dim{d}-h{h}" for d, h in SHAPES]
# (B, T) of the inputs: one sequence and three, T = 1, short, just past 8 and 16 (where a cached mask
# or a chunk may end), long, and past any plausible fixed buffer (a GPT's block_size of 64, 128 or
# 256: LONG_T). Attention at T = 300 costs little at these widths.
LONG_T = 300
BATCHES = ((1, 1), (3, 2), (1, 9), (3, 17), (1, LONG_T), (3, 40))


def padding_patterns() -> list[tuple[int, list[int] | None]]:
    """(T, real lengths) pairs for right padding (None: no mask), all called on one module in an
    order drawn per grade. The full sequence comes first, in the middle and last, the first
    sequence is padded too, and one sequence comes alone: a padding mask taken from one sequence
    for the whole batch (any one of them), or a code path taken only for B = 1, shows. Three calls
    share T = 9 (two paddings and none): a layer that keeps what one call built (a mask cached by
    the length alone, the last mask it was given) answers a later one with it."""
    return [(7, [3, 7, 1]), (9, [9, 1, 4]), (40, [23, 2, 40]), (5, [2]), (LONG_T, [LONG_T, 1, 130]),
            (9, [4, 9, 2]), (9, None)]


def describe_case(dim: int, n_heads: int, x: torch.Tensor, mask: torch.Tensor | None, dtype: str) -> str:
    B, T, _ = x.shape
    if mask is None:
        masking = "no padding mask"
    else:
        lengths = mask.sum(1).tolist()
        masking = f"padding mask with real lengths {lengths}"
    return f"dim={dim}, n_heads={n_heads}, B={B}, T={T}, {dtype}, {masking}"


def compare(got: torch.Tensor, expected: torch.Tensor, *, dtype: str,
            mask: torch.Tensor | None = None) -> str | None:
    """Compare a student's (B, T, dim) output with the reference; None when every position matches."""
    if tuple(got.shape) != tuple(expected.shape):
        return f"output shape: got {tuple(got.shape)}, expected {tuple(expected.shape)}"
    tol = TOLERANCE[dtype]
    g, e = got.double(), expected.double()
    bad = ~torch.isclose(g, e, **tol)                                  # (B, T, dim), NaN counts as bad
    if not bad.any():
        return None
    err = (g - e).abs().nan_to_num(nan=float("inf"))
    b, t, c = (int(i) for i in torch.nonzero(err == err.max())[0])
    bad_positions = bad.any(dim=(0, 2)).nonzero().flatten().tolist()   # (T,) positions wrong anywhere
    lines = []
    nan_positions = torch.isnan(g).any(dim=(0, 2)).nonzero().flatten().tolist()
    if nan_positions:
        lines.append(f"your output has NaN at position(s) {kit.ranges(nan_positions)}")
    lines.append(kit.positions_differing(bad_positions, g.shape[1]))
    if mask is not None:
        padded = ~mask                                                  # (B, T) True = padding
        bad_real = (bad.any(dim=2) & mask).any()
        bad_padded = (bad.any(dim=2) & padded).any()
        if bad_padded and not bad_real:
            lines.append("every real position matches; only padded query positions differ "
                         "(a padded position must attend to the real keys before it)")
        elif bad_real and not bad_padded and padded.any():
            lines.append("padded positions match; real positions differ")
    shown = slice(0, min(4, g.shape[2]))
    lines.append(f"largest difference {err.max().item():.3g} at out[{b}, {t}, {c}]")
    lines.append(f"got      out[{b}, {t}, :{shown.stop}] = {_vec(g[b, t, shown])}")
    lines.append(f"expected out[{b}, {t}, :{shown.stop}] = {_vec(e[b, t, shown])}")
    return "\n".join(lines)


def _vec(v: torch.Tensor) -> str:
    return "[" + ", ".join(f"{float(a):.4f}" for a in v) + "]"


def new_module(student, dim: int, n_heads: int, *, dtype: str = "float64", seed: int = 0, train: bool = False):
    """A student module with the grader's weights loaded; returns it and those weights (float64)."""
    weights = reference.random_weights(dim, seed=1000 + seed)
    # Round the weights to the module's dtype so the float64 reference sees exactly what it holds.
    weights = {k: v.to(DTYPES[dtype]).double() for k, v in weights.items()}
    module = student.new(dim, n_heads, dtype=dtype, seed=seed, train=train,
                         params={k: v.to(DTYPES[dtype]) for k, v in weights.items()})
    return module, weights


def random_input(B: int, T: int, dim: int, *, seed: int, dtype: str = "float64") -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, T, dim, generator=g, dtype=torch.float64).to(DTYPES[dtype])


def finite_difference_jvps(module, x: torch.Tensor, mask, directions: list) -> list:
    """The kit's finite differences (sandbox.kit) of the module's forward along each direction of
    its input x, the mask held: [(estimate, uncertainty)] per direction, shaped like the output."""
    return kit.finite_difference_jvps(module.map, (x, mask), 0, directions)


gradient_agrees = kit.gradient_agrees
