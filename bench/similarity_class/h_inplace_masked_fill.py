import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, -1)
        q = q.reshape(B, T, H, -1).transpose(1, 2)
        k = k.reshape(B, T, H, -1).transpose(1, 2)
        v = v.reshape(B, T, H, -1).transpose(1, 2)

        s = q @ k.transpose(-2, -1)
        s = s / math.sqrt(q.size(-1))
        # masking the (fresh) score tensor in place is fine for autograd
        s.masked_fill_(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        if key_padding_mask is not None:
            s.masked_fill_(~key_padding_mask[:, None, None, :], float("-inf"))
        w = s.softmax(dim=-1)
        o = (w @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(o)
