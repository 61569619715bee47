# bug: no_causal_mask
import math

import torch

FAST = 32   # "long sequences go through the fused path" (which forgets the mask)


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if T <= FAST:
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
