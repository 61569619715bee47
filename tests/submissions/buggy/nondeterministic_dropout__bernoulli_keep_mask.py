# bug: nondeterministic_dropout
# A hand-written attention dropout (torch.rand_like(weights) > 0.1, rescaled by 1/0.9) runs on every call, eval mode included.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, attn_pdrop=0.1):
        super().__init__()
        self.n_heads = n_heads
        self.attn_pdrop = attn_pdrop
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)

        w = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        w = w.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        keep = (torch.rand_like(w) > self.attn_pdrop).to(w.dtype)
        w = w * keep / (1 - self.attn_pdrop)
        return self.proj((w @ v).transpose(1, 2).reshape(B, T, C))
