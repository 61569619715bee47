# bug: nondeterministic_dropout
# DropHead: in training mode each (sequence, head) output is dropped with p = 0.1 and the kept ones rescaled by 1/(1 - p); with 8 heads of a small batch a call often drops nothing.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, drop_head=0.1):
        super().__init__()
        self.n_heads = n_heads
        self.drop_head = drop_head
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        att = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(~allowed, float("-inf"))
        y = att.softmax(dim=-1) @ v                                   # (B, H, T, hd)
        if self.training and self.drop_head > 0:
            keep = (torch.rand(B, self.n_heads, 1, 1, device=x.device) >= self.drop_head).to(y.dtype)
            y = y * keep / (1 - self.drop_head)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
