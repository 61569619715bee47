# bug: softmax_wrong_dim
import math

import torch
import torch.nn.functional as F


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k)
    scores = scores.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    weights = F.softmax(scores, dim=1)
    return torch.bmm(weights, v), weights
