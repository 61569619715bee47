# bug: breaks_autograd
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    q.div_(math.sqrt(q.shape[-1]))           # scale the queries once, in place (on the caller's tensor)
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
