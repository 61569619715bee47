# bug: uses_forbidden_builtin
import math

import torch
import torch.nn.functional as F


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True), weights
