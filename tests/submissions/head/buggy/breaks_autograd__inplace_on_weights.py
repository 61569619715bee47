# bug: breaks_autograd
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(future, float("-inf")).softmax(-1)
    weights.masked_fill_(future, 0.0)        # "to be sure": in place on the softmax's output, which backward needs
    return weights @ v, weights
