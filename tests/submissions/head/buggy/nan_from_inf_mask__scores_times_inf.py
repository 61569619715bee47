# bug: nan_from_inf_mask
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    multiplier = torch.where(allowed, 1.0, float("-inf")).to(q.dtype)          # -inf times a score
    scores = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) * multiplier
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
