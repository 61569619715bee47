# bug: padding_on_queries
# The padding mask is unsqueezed as key_padding_mask[:, None, :, None], so it blanks the padded query rows instead of the padded key columns.
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        H = self.n_heads
        d = self.dim // H
        q, k, v = self.qkv(x).reshape(B, T, 3, H, d).unbind(dim=2)    # each (B, T, H, d)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * d ** -0.5
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None, :, None], float("-inf"))
        probs = scores.softmax(dim=-1)
        out = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(B, T, self.dim)
        return self.proj(out)
