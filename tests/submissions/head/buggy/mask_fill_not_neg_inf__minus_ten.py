# bug: mask_fill_not_neg_inf
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -10.0)
    weights = scores.softmax(-1)
    return torch.einsum("bts,bsd->btd", weights, v), weights
