# bug: softmax_wrong_dim
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, 0)
    return weights @ v, weights
