# bug: causal_mask_off_by_one
import math

import torch


def causal_attention(q, k, v):
    B, T, d_k = q.shape
    s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(d_k)
    s = s.masked_fill(torch.triu(torch.ones(T, T), diagonal=0).bool(), float("-inf"))
    w = torch.softmax(s, dim=-1)
    return torch.bmm(w, v), w
