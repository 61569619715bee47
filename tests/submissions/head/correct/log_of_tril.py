import math

import torch


def causal_attention(q, k, v):
    T = q.shape[1]
    log_mask = torch.log(torch.ones(T, T, dtype=q.dtype).tril())     # 0 where allowed, -inf above
    w = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(q.shape[-1]) + log_mask, dim=-1)
    return w @ v, w
