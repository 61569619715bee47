import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _additive_mask(self, T, key_padding_mask, like):
        # 0 where allowed, -inf where not; same dtype/device as the scores
        bias = torch.zeros(T, T, dtype=like.dtype, device=like.device)
        future = torch.ones(T, T, dtype=torch.bool, device=like.device).triu(1)
        bias = bias.masked_fill(future, float("-inf"))[None, None]  # (1, 1, T, T)
        if key_padding_mask is not None:
            pad = torch.zeros(key_padding_mask.shape, dtype=like.dtype, device=like.device)
            pad = pad.masked_fill(~key_padding_mask, float("-inf"))
            bias = bias + pad[:, None, None, :]                      # (B, 1, T, T)
        return bias

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        h = self.n_heads
        hd = self.dim // h
        qkv = self.qkv(x)
        q = qkv[..., : self.dim].reshape(B, T, h, hd).permute(0, 2, 1, 3)
        k = qkv[..., self.dim : 2 * self.dim].reshape(B, T, h, hd).permute(0, 2, 1, 3)
        v = qkv[..., 2 * self.dim :].reshape(B, T, h, hd).permute(0, 2, 1, 3)

        bias = self._additive_mask(T, key_padding_mask, x)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        out = out.permute(0, 2, 1, 3).reshape(B, T, self.dim)
        return self.proj(out)
