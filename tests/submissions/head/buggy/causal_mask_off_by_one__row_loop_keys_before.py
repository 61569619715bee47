# bug: causal_mask_off_by_one
import math

import torch
import torch.nn.functional as F


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    rows, outs = [], []
    for t in range(T):
        s = q[:, t:t + 1] @ k[:, :t].transpose(1, 2) / math.sqrt(d_k)    # keys before t: itself left out
        w = torch.softmax(s, dim=-1)
        outs.append(w @ v[:, :t])
        rows.append(F.pad(w, (0, T - t)))
    return torch.cat(outs, dim=1), torch.cat(rows, dim=1)
