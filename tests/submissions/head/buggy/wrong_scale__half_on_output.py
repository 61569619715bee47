# bug: wrong_scale
import math

import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[1], q.shape[2]
    scale = d_k ** -0.25                           # "split the scale between scores and output"
    scores = (q @ k.transpose(-2, -1) * scale).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v * scale, weights
