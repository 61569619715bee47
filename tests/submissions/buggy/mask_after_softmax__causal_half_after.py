# bug: mask_after_softmax
# The padding mask is applied to the scores before the softmax (right), but the causal mask only zeroes the weights after it, without renormalising.
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
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        probs = scores.softmax(dim=-1)
        causal = torch.tril(torch.ones(T, T, device=x.device, dtype=probs.dtype))
        probs = probs * causal
        out = (probs @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
