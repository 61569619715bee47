import torch


def causal_attention(q, k, v):
    T, d = q.shape[-2:]
    s = q @ k.transpose(-1, -2) / d ** 0.5
    s = s.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
    e = torch.exp(s - s.max(dim=-1, keepdim=True).values)       # the diagonal is never masked: max is finite
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v, w
