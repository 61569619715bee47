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
        nh = self.n_heads
        hs = C // nh
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, nh, hs).transpose(1, 2)
        k = k.view(B, T, nh, hs).transpose(1, 2)
        v = v.view(B, T, nh, hs).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        # use the most negative finite number of the dtype instead of -inf
        big_neg = torch.finfo(att.dtype).min
        causal = torch.ones(T, T, device=x.device).tril().bool()
        att = att.masked_fill(~causal, big_neg)
        if key_padding_mask is not None:
            att = att.masked_fill(~key_padding_mask[:, None, None, :], big_neg)
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
