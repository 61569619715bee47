# outside the catalog: the scores divided by the 0/1 lower triangle (s / 0 is +inf or -inf by the sign of s, 0 / 0 NaN): no catalog mistake divides by the mask
import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    tril = torch.tril(torch.ones(T, T, dtype=q.dtype))
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) / tril
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
