"""The reference: PyTorch's own causal attention for `out`, and the softmax it computes for the
weights, always in float64.

`F.scaled_dot_product_attention(q, k, v, is_causal=True)` returns only the output; the weights are
the softmax of the masked scores written out below. Both agree to about 1e-16 in float64
(`weights @ v` against SDPA, measured over every shape the tests use). The harness runs this, never
the student's process: there, SDPA is one of the refused built-ins (sandbox.audit).
"""
from __future__ import annotations

import math

import torch
from torch.nn import functional as F

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out (B, T, d_k), weights (B, T, T)) for the given inputs, in float64."""
    q, k, v = q.double(), k.double(), v.double()
    T, d_k = q.shape[-2], q.shape[-1]
    with torch.no_grad():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)               # (B, T, d_k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)                           # (B, T, T)
        future = torch.ones(T, T, dtype=torch.bool).triu(1)                         # True: key s > t
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return out, weights


def random_qkv(B: int, T: int, d_k: int, *, seed: int, dtype: str = "float64") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v drawn from a standard normal, reproducible from the seed, in `dtype`."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, T, d_k, generator=g, dtype=torch.float64).to(DTYPES[dtype]) for _ in range(3))
    return q, k, v


def equal_score_qkv(B: int, T: int, d_k: int, *, seed: int, dtype: str = "float64") -> tuple[torch.Tensor, ...]:
    """q, k, v (d_k >= 2) for which every score of a row is the same, with nothing a function could
    recognise (q = 0 would be one input to special-case): in each sequence the queries live in one
    part of a random rotation of the space, and the keys are one fixed vector plus a part that
    varies only in the other, orthogonal part, so q_t . k_s does not depend on s."""
    g = torch.Generator().manual_seed(seed)
    qs, ks = [], []
    for _ in range(B):
        rotation, _ = torch.linalg.qr(torch.randn(d_k, d_k, generator=g, dtype=torch.float64))
        split = int(torch.randint(1, d_k, (1,), generator=g))
        queries, keys = rotation[:, :split], rotation[:, split:]                    # orthogonal parts
        qs.append(torch.randn(T, split, generator=g, dtype=torch.float64) @ queries.T)
        fixed = torch.randn(d_k, generator=g, dtype=torch.float64)
        ks.append(fixed + torch.randn(T, d_k - split, generator=g, dtype=torch.float64) @ keys.T)
    v = torch.randn(B, T, d_k, generator=g, dtype=torch.float64)
    return tuple(t.to(DTYPES[dtype]) for t in (torch.stack(qs), torch.stack(ks), v))
