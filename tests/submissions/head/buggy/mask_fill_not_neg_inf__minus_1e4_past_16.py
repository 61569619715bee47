# bug: mask_fill_not_neg_inf
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    # "half precision safe" fill for long sequences only; -inf below
    fill = -10.0 if T > 16 else float("-inf")
    weights = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), fill).softmax(dim=-1)
    return weights @ v, weights
