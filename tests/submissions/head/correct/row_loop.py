import math

import torch
import torch.nn.functional as F


def causal_attention(q, k, v):
    """One query position at a time: position t sees keys 0..t only."""
    B, T, d_k = q.shape
    rows, outs = [], []
    for t in range(T):
        s = (q[:, t:t + 1] @ k[:, :t + 1].transpose(1, 2)) / math.sqrt(d_k)   # (B, 1, t+1)
        w = torch.softmax(s, dim=-1)
        outs.append(w @ v[:, :t + 1])                                        # (B, 1, d_k)
        rows.append(F.pad(w, (0, T - t - 1)))                                # zeros for the future keys
    return torch.cat(outs, dim=1), torch.cat(rows, dim=1)
