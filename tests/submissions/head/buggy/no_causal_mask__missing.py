# bug: no_causal_mask
import math

import torch


def causal_attention(q, k, v):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
