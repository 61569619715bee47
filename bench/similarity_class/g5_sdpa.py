import torch
from torch import nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """Causal multi-head self-attention on top of F.scaled_dot_product_attention."""

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, D = x.shape
        H = self.n_heads
        hd = D // H
        q, k, v = self.qkv(x).split(D, dim=-1)
        q = q.reshape(B, T, H, hd).transpose(1, 2)
        k = k.reshape(B, T, H, hd).transpose(1, 2)
        v = v.reshape(B, T, H, hd).transpose(1, 2)

        # SDPA bool mask: True = this key may be attended to
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        mask = mask.view(1, 1, T, T)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.bool().view(B, 1, 1, T)

        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, T, D)
        return self.proj(y)
