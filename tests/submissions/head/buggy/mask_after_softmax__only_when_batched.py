# bug: mask_after_softmax
import math

import torch


def causal_attention(q, k, v):
    B, T, _ = q.shape
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    if B == 1:
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    else:   # the batched branch masks the weights instead of the scores
        weights = scores.softmax(dim=-1).masked_fill(future, 0.0)
    return weights @ v, weights
