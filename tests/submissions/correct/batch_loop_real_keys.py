import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        nh, hs = self.n_heads, C // self.n_heads
        results = []
        for b in range(B):
            # padding is on the right, so the real keys of sequence b are its first n
            n = T if key_padding_mask is None else int(key_padding_mask[b].sum())
            q, k, v = self.qkv(x[b]).split(C, dim=-1)          # (T, C) each
            q = q.view(T, nh, hs).transpose(0, 1)               # (nh, T, hs)
            k = k[:n].view(n, nh, hs).transpose(0, 1)           # (nh, n, hs)
            v = v[:n].view(n, nh, hs).transpose(0, 1)
            att = q @ k.transpose(1, 2) / math.sqrt(hs)         # (nh, T, n)
            # query t sees keys s <= t among the real ones
            causal = torch.ones(T, n, dtype=torch.bool, device=x.device).tril()
            att = att.masked_fill(~causal, float("-inf"))
            y = F.softmax(att, dim=-1) @ v                       # (nh, T, hs)
            results.append(y.transpose(0, 1).reshape(T, C))
        return self.proj(torch.stack(results))
