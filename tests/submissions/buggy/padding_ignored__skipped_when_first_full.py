# bug: padding_ignored
# The padding mask is skipped when the batch's first sequence has no padding (the code checks key_padding_mask[0] only), so a batch whose first sequence is full lets every sequence attend to padding.
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
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, hd).transpose(1, 2) for t in (q, k, v))
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None and not key_padding_mask[0].all():   # "is there padding?"
            allowed = allowed & key_padding_mask[:, None, None, :]
        att = (q @ k.transpose(-2, -1) / math.sqrt(hd)).masked_fill(~allowed, float("-inf"))
        y = att.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
