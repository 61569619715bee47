import math

import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[-2], q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)                  # (B, T, T)
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return weights @ v, weights
