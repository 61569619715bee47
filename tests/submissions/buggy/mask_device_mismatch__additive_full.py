# bug: mask_device_mismatch
# The additive causal mask comes from torch.full((T, T), -inf) with no device=, so it is always on the CPU and fails next to GPU scores.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.nh = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hs = C // self.nh
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.nh, hs).transpose(1, 2)
        k = k.view(B, T, self.nh, hs).transpose(1, 2)
        v = v.view(B, T, self.nh, hs).transpose(1, 2)

        bias = torch.full((T, T), float("-inf")).triu(diagonal=1)
        att = q @ k.transpose(-2, -1) / math.sqrt(hs) + bias.to(x.dtype)
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask[:, None, None, :].logical_not(), float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
