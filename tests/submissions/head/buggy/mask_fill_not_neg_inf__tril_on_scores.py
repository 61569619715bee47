# bug: mask_fill_not_neg_inf
import math

import torch


def causal_attention(q, k, v):
    scores = torch.tril(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
