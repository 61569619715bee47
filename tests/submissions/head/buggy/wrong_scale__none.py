# bug: wrong_scale
import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    scores = q @ k.transpose(-2, -1)
    weights = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")).softmax(dim=-1)
    return weights @ v, weights
