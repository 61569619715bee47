import torch
from torch import nn
from torch.nn.functional import scaled_dot_product_attention


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _heads(self, t, B, T):
        # (B, T, dim) -> (B, n_heads, T, head_dim)
        return t.reshape(B, T, self.n_heads, self.dim // self.n_heads).permute(0, 2, 1, 3)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        qkv = self.qkv(x)
        q = self._heads(qkv[..., :self.dim], B, T)
        k = self._heads(qkv[..., self.dim:2 * self.dim], B, T)
        v = self._heads(qkv[..., 2 * self.dim:], B, T)
        mask = torch.ones(T, T, device=x.device).tril().bool()
        mask = mask.expand(B, 1, T, T)
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.reshape(B, 1, 1, T)
        y = scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.permute(0, 2, 1, 3).reshape(B, T, self.dim)
        return self.proj(y)
