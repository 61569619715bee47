import math

import torch


def causal_attention(q, k, v):
    dtype = q.dtype
    q, k, v = q.double(), k.double(), v.double()
    T = q.shape[1]
    s = q @ k.transpose(1, 2) / math.sqrt(q.shape[2])
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), -math.inf)
    w = s.softmax(dim=-1)
    return (w @ v).to(dtype), w.to(dtype)
