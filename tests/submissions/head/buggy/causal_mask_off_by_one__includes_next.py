# bug: causal_mask_off_by_one
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    future = torch.ones(T, T, dtype=torch.bool).triu(2)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return weights @ v, weights
