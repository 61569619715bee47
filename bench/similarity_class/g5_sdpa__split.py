import torch
from torch import nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, D = x.shape
        H = self.n_heads
        hd = D // H
        packed = self.qkv(x)
        q, k, v = packed.split(D, dim=-1)
        q = q.view(B, T, H, hd)
        q = q.permute(0, 2, 1, 3)
        k = k.view(B, T, H, hd)
        k = k.permute(0, 2, 1, 3)
        v = v.view(B, T, H, hd)
        v = v.permute(0, 2, 1, 3)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device)
        mask = mask.tril()
        mask = mask.view(1, 1, T, T)
        if key_padding_mask is not None:
            pad = key_padding_mask.bool()
            pad = pad.view(B, 1, 1, T)
            mask = mask & pad
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.permute(0, 2, 1, 3)
        y = y.reshape(B, T, D)
        return self.proj(y)
