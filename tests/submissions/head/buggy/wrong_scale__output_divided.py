# bug: wrong_scale
import math

import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[1], q.shape[2]
    scores = (q @ k.transpose(-2, -1)).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v / math.sqrt(d_k), weights     # the 1/sqrt(d_k) put on the output instead
