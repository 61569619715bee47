import torch
from torch.nn import functional as F


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    q = q * d_k ** -0.5                                              # scale the queries, not the scores
    bias = torch.zeros(T, T, dtype=q.dtype).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    scores = torch.baddbmm(bias.expand(B, T, T), q, k.transpose(1, 2))
    weights = F.softmax(scores, dim=-1)
    return torch.bmm(weights, v), weights
