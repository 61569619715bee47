# bug: mask_after_softmax
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), 0.0)
    return weights @ v, weights
