# bug: params_depend_on_heads
# Every head has its own full-size nn.Linear(dim, dim) for q, k and v, so the parameter count grows with n_heads.
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.dim = dim
        self.queries = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_heads)])
        self.keys = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_heads)])
        self.values = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, :]  # (B, T, T)
        heads = []
        for wq, wk, wv in zip(self.queries, self.keys, self.values):
            q, k, v = wq(x), wk(x), wv(x)  # (B, T, dim) each
            s = q @ k.transpose(1, 2) / math.sqrt(self.dim)
            s = s.masked_fill(~allowed, float("-inf"))
            heads.append(F.softmax(s, dim=-1) @ v)
        return self.proj(torch.cat(heads, dim=-1))
