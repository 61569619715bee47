# bug: wrong_scale
import torch


def causal_attention(q, k, v):
    T, d_k = q.shape[1], q.shape[2]
    scores = torch.einsum("btd,bsd->bts", q, k) / d_k
    allowed = torch.tril(torch.ones(T, T, dtype=torch.bool))
    weights = torch.where(allowed, scores, float("-inf")).softmax(-1)
    return weights @ v, weights
