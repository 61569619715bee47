# bug: nan_from_inf_mask
import math

import torch


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    additive = torch.triu(torch.ones(T, T, dtype=q.dtype), diagonal=1) * -math.inf
    w = torch.softmax(torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k) + additive, dim=-1)
    return torch.bmm(w, v), w
