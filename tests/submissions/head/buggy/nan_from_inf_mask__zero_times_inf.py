# bug: nan_from_inf_mask
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    mask = (1 - torch.tril(torch.ones(T, T, dtype=q.dtype))) * float("-inf")   # 0 * -inf is NaN
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
