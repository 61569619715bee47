# bug: softmax_wrong_dim
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[-2]
    s = q @ k.mT / math.sqrt(q.shape[-1])
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    w = s.softmax(dim=-2)
    return w @ v, w
