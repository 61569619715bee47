# unknown: the key mask is rebuilt from the lengths with <= instead of <, so each padded sequence keeps one padding token (the first after its real ones) as a real key
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.reshape(B, T, H, C // H).transpose(1, 2)
        k = k.reshape(B, T, H, C // H).transpose(1, 2)
        v = v.reshape(B, T, H, C // H).transpose(1, 2)
        pos = torch.arange(T, device=x.device)
        allowed = pos[None, :] <= pos[:, None]
        if key_padding_mask is not None:
            lengths = key_padding_mask.sum(-1)                             # real tokens per sequence
            real_key = pos[None, :] <= lengths[:, None]                    # (B, T)
            allowed = allowed & real_key[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
