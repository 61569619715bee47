# unknown: the input goes through a parameter-free layer norm (F.layer_norm) before the qkv projection ("pre-norm"), which is the transformer block's job, so every output is computed from normalised inputs
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        h = F.layer_norm(x, (C,))                      # pre-norm, no extra parameters
        q, k, v = self.qkv(h).split(C, dim=-1)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / math.sqrt(C // H)
        ok = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        s = s.masked_fill(~ok, float("-inf"))
        return self.proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C))
