"""The attention matrix of each head, read out of the layer's output with the grader's weights.

The statement fixes the layers (self.qkv, self.proj), so the grader loads weights of its own,
drawn from the grade's seed: with proj invertible, the output determines z = concat_h(A_h v_h),
and with several forwards that change only the value rows of qkv (enough to span every position:
sandbox.kit.values_needed), z determines each head's A_h. A real attention layer keeps the same
A_h across those forwards, and A_h is a softmax of c * q_h . k_h over the causal keys for q, k the
grader computes itself (sandbox.kit.softmax_fit). A layer that is not attention (a running mean,
weights that fall off with distance plus a trace of q . k, a term that vanishes when q = 0) has no
such matrix, whatever it says about itself and whichever inputs it may think are probes.

The layer may read qkv's output in another order (qkv_order: any order of the three blocks, or
interleaved per head) and may leave proj out (missing_output_projection): those are mistakes the
comparison tests cost, and the read-out tries each layout, so they do not cost the properties.
"""
from __future__ import annotations

import itertools
import math

import torch

from sandbox.kit import read_matrix, softmax_fit, values_needed

DIM, HEADS = 24, 4          # the shape trap of the statement: sqrt(dim) != head_dim
BATCHES, LENGTHS = (2, 3), (5, 6, 7)
# What a read-out may be off by: a layer that computes its softmax in float16 (graph intact, a
# precision remark, not a mistake) rounds its weights to ~5e-4; every non-attention layer measured
# is off by more than 1e-2.
ATOL, RTOL = 2e-3, 1e-2


def layouts(dim: int, heads: int) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(q rows, k rows, v rows) of qkv, stated layout first, then the other orders a layer may
    split qkv's output in."""
    blocks = [torch.arange(i * dim, (i + 1) * dim) for i in range(3)]
    found = [(blocks[a], blocks[b], blocks[c]) for a, b, c in itertools.permutations(range(3))]
    per_head = torch.arange(3 * dim).reshape(heads, 3, dim // heads)
    found.append((per_head[:, 0].flatten(), per_head[:, 1].flatten(), per_head[:, 2].flatten()))
    return found


def _weights(draws, label, dim: int, present: dict) -> dict:
    """Weights drawn like nn.Linear's default init, for the parameters the layer has as stated."""
    g = draws.generator(*label)
    bound = 1 / math.sqrt(dim)
    shapes = {"qkv.weight": (3 * dim, dim), "qkv.bias": (3 * dim,), "proj.weight": (dim, dim), "proj.bias": (dim,)}
    return {name: (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1) * bound
            for name, shape in shapes.items() if present.get(name) == shape}


def attends(student, draws, label, *, first: list | None = None) -> str | None:
    """None when, at a shape drawn from the family, the layer's output with the grader's weights
    is attention under some layout (see the module's docstring), else why not. None too when the
    layer does not have the stated layers (the interface tests grade that). `first`: a list
    remembering which layout worked, tried first next time."""
    dim, heads = DIM, HEADS
    hd = dim // heads
    module = student.new(dim, heads)
    if module.params.get("qkv.weight") != (3 * dim, dim):
        return None
    B, T = draws.choice(BATCHES, *label, "B"), draws.choice(LENGTHS, *label, "T")
    x = draws.normal(B, T, dim, label=(*label, "x"))
    base = _weights(draws, (*label, "weights"), dim, module.params)
    all_layouts = layouts(dim, heads)
    order = list(range(len(all_layouts)))
    if first:
        order.remove(first[0])
        order.insert(0, first[0])
    problem = None
    for index in order:
        q_rows, k_rows, v_rows = all_layouts[index]
        outs, values = [], []
        for i in range(values_needed(T, hd)):
            weights = {k: v.clone() for k, v in base.items()}
            fresh = _weights(draws, (*label, "values", index, i), dim, module.params)
            for key in ("qkv.weight", "qkv.bias"):
                if key in weights:
                    weights[key][v_rows] = fresh[key][v_rows]
            out = module.call_with(weights, x)
            if tuple(out.shape) != (B, T, dim):
                return f"its output has shape {tuple(out.shape)} for an input of shape {(B, T, dim)}"
            outs.append(out.double())
            values.append(_project(x, weights, v_rows))
        q, k = _project(x, base, q_rows), _project(x, base, k_rows)
        found = _read_heads(outs, values, q, k, base, heads)
        if found is None:
            if first is not None:
                first[:] = [index]
            return None
        problem = problem or found    # the stated layout's (or the one that worked before)
    return problem


def _project(x: torch.Tensor, weights: dict, rows: torch.Tensor) -> torch.Tensor:
    out = x.double() @ weights["qkv.weight"][rows].T
    return out + weights["qkv.bias"][rows] if "qkv.bias" in weights else out


def _groupings(dim: int, heads: int) -> list[list[torch.Tensor]]:
    """Which channels make each head: contiguous blocks, or every heads-th channel."""
    hd = dim // heads
    return [[torch.arange(h * hd, (h + 1) * hd) for h in range(heads)],
            [torch.arange(h, dim, heads) for h in range(heads)]]


def _read_heads(outs: list, values: list, q, k, weights: dict, heads: int) -> str | None:
    """None when some reading of the outputs (through proj or without it, heads grouped as
    stated or strided) makes every head's matrix attention; else the first reading's problem."""
    B, T, dim = outs[0].shape
    hd = dim // heads
    mixed = []
    if "proj.weight" in weights:
        P, b = weights["proj.weight"], weights.get("proj.bias", torch.zeros(dim, dtype=torch.float64))
        mixed.append([torch.linalg.solve(P, (o - b).transpose(-2, -1)).transpose(-2, -1) for o in outs])
    mixed.append(outs)                                                  # a layer without proj
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    first = None
    for zs in mixed:
        scale = max(max(float(z.abs().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0).max()) for z in zs), 1.0)
        for split, merge in itertools.product(_groupings(dim, heads), repeat=2):
            problem = None
            for h in range(heads):
                A, residual = read_matrix([v[..., split[h]] for v in values], [z[..., merge[h]] for z in zs])
                if not torch.isfinite(A).all():
                    problem = "its output holds NaN or infinity for ordinary inputs"
                elif (residual > ATOL * scale).any():
                    problem = ("its output is not attention weights applied to the values: changing only "
                               "the value rows of qkv changes the weights its output is made with")
                else:
                    scores = q[..., split[h]] @ k[..., split[h]].transpose(-2, -1) / math.sqrt(hd)
                    problem = softmax_fit(A, scores, causal, atol=ATOL, rtol=RTOL)
                if problem:
                    problem = f"head {h}, B={B}, T={T}: {problem}"
                    break
            if problem is None:
                return None
            first = first or problem
    return first
