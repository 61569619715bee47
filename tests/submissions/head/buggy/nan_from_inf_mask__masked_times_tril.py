# bug: nan_from_inf_mask
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    tril = torch.tril(torch.ones(T, T, dtype=q.dtype))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(tril == 0, float("-inf")) * tril     # -inf * 0 at every future key
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
