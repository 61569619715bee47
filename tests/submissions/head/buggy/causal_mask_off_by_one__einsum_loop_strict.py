# bug: causal_mask_off_by_one
import math

import torch


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    weights = torch.zeros(B, T, T, dtype=q.dtype)
    out = torch.zeros_like(v)
    for t in range(1, T):                    # row 0 has no key before it: left at zero
        w = torch.einsum("bd,bsd->bs", q[:, t], k[:, :t]).div(math.sqrt(d_k)).softmax(-1)
        weights[:, t, :t] = w
        out[:, t] = torch.einsum("bs,bsd->bd", w, v[:, :t])
    return out, weights
