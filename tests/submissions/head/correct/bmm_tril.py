import math

import torch
import torch.nn.functional as F


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k)
    mask = torch.tril(torch.ones(T, T, device=q.device)).bool()
    scores = scores.masked_fill(~mask, float("-inf"))
    attn = F.softmax(scores, dim=2)
    return torch.bmm(attn, v), attn
