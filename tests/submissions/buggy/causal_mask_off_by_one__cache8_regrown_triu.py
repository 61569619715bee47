# bug: causal_mask_off_by_one
# The cached 8x8 mask is right, but for T > 8 it is regrown as ~triu(ones) (diagonal 0), which also hides each token from itself: sequences longer than 8 get NaN at position 0, and once one has been seen every later call (shorter ones too) uses the bad mask.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("allowed", torch.ones(8, 8, dtype=torch.bool).tril(), persistent=False)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        hd = C // H
        if T > self.allowed.shape[0]:
            # grow the cache for longer sequences: keep what is not in the future
            future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu()
            self.allowed = ~future
        mask = self.allowed[:T, :T].to(x.device)

        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        scores = scores.masked_fill(~mask, float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        out = scores.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
