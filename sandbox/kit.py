"""The checks library exercises are written with (beside sandbox.contract): what every exercise
needs to give points only for what the student's code computes, measured with inputs the grader
draws from a seed the student's code never sees.

- `Draws`: every input, shape order and weight of a grade, drawn from the host's seed
  (HarnessJob.seed, grader.keys.grade_seed). A label names each draw, so a test's draws do not
  depend on which other tests ran; without the seed, no label says anything about a draw.
- `differs`: NaN-aware comparison. NaN never equals a number, and NaN equals NaN only where the
  caller says a NaN is allowed to stay (a padded query with no key, say).
- `finite_difference_jvps` / `gradient_agrees`: a gradient reported by the student's process,
  checked against central differences of forward outputs computed here in float64.
- `ranges` / `positions_differing`: positions as a reader takes them in feedback ("0..2, 5",
  "positions that differ: 3 (1 of 8, numbered 0..7)").
- `read_matrix` / `softmax_fit`: the mixing matrix read out of outputs for several value inputs
  the grader chose (out = A v: with enough values, the outputs determine A), and whether that
  matrix is a softmax of scores the grader computed itself.

Runs in the trusted harness only; nothing here runs the student's code except through the
callables the caller passes (a RemoteModule's map).
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence

import torch

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def ranges(values: list[int]) -> str:
    """[0, 1, 2, 5] -> '0..2, 5'; [] -> 'none'."""
    out, start, prev = [], None, None
    for v in [*values, None]:
        if v is not None and prev is not None and v == prev + 1:
            prev = v
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}..{prev}")
        start = prev = v
    return ", ".join(out) if out else "none"


def positions_differing(values: list[int], length: int) -> str:
    """The feedback line naming the sequence positions that differ, with how many of how many, so
    that '0' cannot be read as 'none': 'positions that differ: 0 (1 of 2, numbered 0..1)'."""
    if len(values) == length:
        return f"positions that differ: all {length} (0..{length - 1})"
    return f"positions that differ: {ranges(values)} ({len(values)} of {length}, numbered 0..{length - 1})"


# --- draws from the host's seed ----------------------------------------------------------------

class Draws:
    """Reproducible draws from a grade's seed: the same seed and label give the same draw."""

    def __init__(self, seed: str):
        self.seed = seed

    def _digest(self, label: tuple) -> bytes:
        text = "\0".join(str(part) for part in label)
        return hashlib.sha256(f"{self.seed}\0{text}".encode()).digest()

    def generator(self, *label) -> torch.Generator:
        """A torch generator for the draw named `label`."""
        return torch.Generator().manual_seed(int.from_bytes(self._digest(label)[:8], "big") >> 1)

    def integer(self, low: int, high: int, *label) -> int:
        """An integer in [low, high]."""
        return low + int.from_bytes(self._digest(label)[8:16], "big") % (high - low + 1)

    def shuffled(self, items: Sequence, *label) -> list:
        """`items` in an order drawn for `label`."""
        order = torch.randperm(len(items), generator=self.generator("order", *label)).tolist()
        return [items[i] for i in order]

    def choice(self, items: Sequence, *label):
        return items[self.integer(0, len(items) - 1, "choice", *label)]

    def normal(self, *shape: int, label, dtype: str = "float64") -> torch.Tensor:
        """A standard normal tensor, drawn in float64 and rounded to `dtype`."""
        g = self.generator("normal", *label) if isinstance(label, tuple) else self.generator("normal", label)
        return torch.randn(*shape, generator=g, dtype=torch.float64).to(DTYPES[dtype])


# --- comparisons that know NaN ----------------------------------------------------------------

def differs(got: torch.Tensor, expected: torch.Tensor, *, atol: float, rtol: float,
            nan_may_stay: torch.Tensor | None = None) -> torch.Tensor:
    """Where `got` differs from `expected` (a bool tensor of their broadcast shape): beyond the
    tolerance, or NaN or infinite on one side only, or NaN on both sides where `nan_may_stay` is
    not True. Never treats a NaN as equal to anything by default."""
    g, e = got.double(), expected.double()
    close = torch.isclose(g, e, atol=atol, rtol=rtol)          # NaN: never close; inf only to the same inf
    if nan_may_stay is not None:
        both_nan = torch.isnan(g) & torch.isnan(e)
        close = close | (both_nan & nan_may_stay.expand_as(both_nan))
    return ~close


def largest_change(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b|, with a NaN on either side counted as a change of infinity."""
    diff = (a.double() - b.double()).abs()
    diff = torch.where(torch.isnan(a.double()) | torch.isnan(b.double()), float("inf"), diff)
    return float(diff.nan_to_num(nan=float("inf")).max()) if diff.numel() else 0.0


# --- gradients checked against the forward ----------------------------------------------------

# Central-difference steps. One step cannot suit every submission: a float64 forward is measured
# best at 1e-6, while a forward that computes its softmax in float16 rounds so coarsely that only
# steps near 1e-2 see the slope autograd (rightly) reports.
FD_STEPS = (1e-6, 1e-4, 1e-3, 1e-2, 1e-1)


def finite_difference_jvps(forward_many: Callable[[list], list], point: Sequence, wrt: int,
                           directions: list[torch.Tensor]) -> list:
    """For each direction u, the central differences (f(p + h u) - f(p - h u)) / 2h along argument
    `wrt` of `point` at every step of FD_STEPS but the last, each with its uncertainty (how far it
    is from the next step's estimate), in float64, from forward outputs alone. `forward_many`
    takes a list of argument tuples and returns one output tensor for each (a RemoteModule's
    `map`, with the output picked). Returns, per direction, [(estimate, uncertainty)]."""
    base = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in point]
    result = []
    for u in directions:  # one round trip per direction: a slow but correct forward stays within a call's limit
        calls = []
        for h in FD_STEPS:
            for sign in (1, -1):
                args = list(base)
                args[wrt] = base[wrt] + sign * h * u
                calls.append(tuple(args))
        outs = forward_many(calls)
        estimates = [(plus.double() - minus.double()) / (2 * h)
                     for h, plus, minus in zip(FD_STEPS, outs[::2], outs[1::2])]
        result.append([(a, (a - b).abs()) for a, b in zip(estimates, estimates[1:])])
    return result


def gradient_agrees(autograd: torch.Tensor, numeric: list, *, atol: float) -> torch.Tensor:
    """Where an autograd value agrees with the forward's finite differences at some step, within that
    step's own uncertainty. `numeric` is [(estimate, uncertainty)] of the same shape as `autograd`.
    A gradient hidden from autograd disagrees at every step (in float64 code the estimates are
    tight); a forward computed in low precision agrees at the steps its rounding allows. NaN on
    either side never agrees."""
    ok = torch.zeros_like(autograd, dtype=torch.bool)
    for estimate, uncertainty in numeric:
        ok |= (autograd - estimate).abs() <= 1e-4 * estimate.abs() + atol + 4 * uncertainty
    return ok


def contracted_jvps(grads: torch.Tensor, cotangents: torch.Tensor, direction: torch.Tensor,
                    numeric: list) -> tuple[torch.Tensor, list]:
    """What a stack of vector-Jacobian products says and what the forward says along `direction`:
    `grads` (N, *input) are the products of N cotangents (N, *output) with the Jacobian, and
    `numeric` the finite differences along `direction` (finite_difference_jvps). Returns
    (autograd (N, B): <grads[n], u> per leading batch entry, and [(estimate, uncertainty)] of
    <cotangent_n, J u> in the same layout)."""
    n, batch = grads.shape[0], grads.shape[1]
    autograd = (grads.double() * direction.double()).reshape(n, batch, -1).sum(dim=2)
    cot = cotangents.double().reshape(n, batch, -1)
    contracted = [((cot * est.double().reshape(1, batch, -1)).sum(dim=2),
                   (cot.abs() * unc.double().reshape(1, batch, -1)).sum(dim=2)) for est, unc in numeric]
    return autograd, contracted


# --- the mixing matrix, read out of outputs ---------------------------------------------------

def values_needed(T: int, width: int) -> int:
    """How many value inputs of `width` columns read a (T, T) matrix out with one to spare: the
    spare makes the read-out a test (a matrix that changes from one forward to the next leaves a
    residual) as well as a solution."""
    return math.ceil(T / width) + 1


def read_matrix(values: list[torch.Tensor], mixed: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """The matrix A with mixed[i] = A @ values[i] for every i, by least squares in float64, and the
    residual of that fit per row. values[i] and mixed[i] are (..., T, width); together the values
    must span T dimensions (values_needed). Returns (A (..., T, T), residual (..., T): the largest
    |A v - mixed| of each row over every forward)."""
    V = torch.cat([v.double() for v in values], dim=-1)            # (..., T, n*width)
    Z = torch.cat([z.double() for z in mixed], dim=-1)             # (..., T, n*width)
    finite = torch.isfinite(Z).all(dim=-1, keepdim=True)            # rows with NaN: read as NaN
    Zf = torch.where(finite, Z, 0.0)
    # A V = Z  <=>  V^T A^T = Z^T
    At = torch.linalg.lstsq(V.transpose(-2, -1), Zf.transpose(-2, -1)).solution
    A = At.transpose(-2, -1)
    A = torch.where(finite, A, float("nan"))
    residual = (A @ V - Z).abs().nan_to_num(nan=float("inf")).amax(dim=-1)
    return A, residual


MIN_SCALE = 1e-2   # below it a softmax is so flat that its weights barely follow the scores


def softmax_fit(A: torch.Tensor, scores: torch.Tensor, allowed: torch.Tensor, *, atol: float,
                rtol: float = 1e-3) -> str | None:
    """None when every row of A (..., T, T) is a softmax of c * scores over the keys `allowed`
    (bool, broadcastable to A: the keys the rows must weigh, the exercise says which), times the row's
    own sum (which the row-sum tests grade), for one c >= MIN_SCALE; else why not. A scale mistake
    still fits (its c is another); weights that ignore an allowed key, give weight to
    another one, or do not follow the scores are not. `scores` are the grader's own q . k."""
    A, S = A.double(), scores.double()
    allowed = allowed.expand_as(A)
    if not torch.isfinite(A).all():
        return "its weights hold NaN or infinity"
    if (A < -atol).any():
        return "its weights have negative entries, which no softmax gives"
    # The scale c from the entries large enough to read reliably: within a row, log A differs from
    # key to key by c times the score's difference.
    reliable = allowed & (A > max(1e-3, 10 * atol))
    counts = reliable.sum(dim=-1, keepdim=True)
    informative = (counts >= 2).expand_as(reliable) & reliable
    c = 1.0
    if informative.any():
        logs = torch.where(informative, A.clamp_min(1e-300).log(), 0.0)
        centred_log = torch.where(informative, logs - logs.sum(-1, keepdim=True) / counts.clamp_min(1), 0.0)
        s = torch.where(informative, S, 0.0)
        centred_s = torch.where(informative, s - s.sum(-1, keepdim=True) / counts.clamp_min(1), 0.0)
        spread = float((centred_s ** 2).sum())
        # scores equal within every row (the worked example) say nothing of c: every c fits them
        if spread / int(informative.sum()) > 1e-10:
            c = float((centred_log * centred_s).sum()) / spread
            if not c >= MIN_SCALE:
                return (f"its weights do not grow with the scores q . k as a softmax's do (fitted scale {c:.3g}): "
                        f"they do not come from the queries and the keys")
    logits = torch.where(allowed, c * S, float("-inf"))
    total = torch.where(allowed, A, 0.0).sum(dim=-1, keepdim=True)
    model = torch.nan_to_num(logits.softmax(dim=-1), nan=0.0) * total
    off = (model - A).abs() > atol + rtol * A.abs()
    if off.any():
        where = off.nonzero()[0].tolist()
        key, query = where[-1], where[-2]
        kind = ("a key it may not see" if not bool(allowed[tuple(where)]) else "a key it must weigh")
        return (f"its weights are not a softmax of the scores q . k over the keys each position may see: "
                f"weight {A[tuple(where)].item():.4g} for query {query} on {kind} ({key}), where a softmax of "
                f"{c:.3g} * q . k over those keys gives {model[tuple(where)].item():.4g}")
    return None
