# bug: causal_mask_off_by_one
# The allowed set is tril(diagonal=2), so every position also sees the next two tokens (the two positions after it).
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
        B, T, D = x.shape
        nh = self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(B, T, nh, D // nh).transpose(1, 2)
        k = k.reshape(B, T, nh, D // nh).transpose(1, 2)
        v = v.reshape(B, T, nh, D // nh).transpose(1, 2)

        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=2)
        if key_padding_mask is not None:
            allowed = allowed[None, None] & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.proj(y.transpose(1, 2).reshape(B, T, D))
