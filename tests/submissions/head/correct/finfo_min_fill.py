import math

import torch


def causal_attention(q, k, v):
    T = q.size(1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))
    keep = torch.tril(torch.ones(T, T, dtype=torch.bool))
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
