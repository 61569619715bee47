# bug: fixed_max_length
# SDPA gets a causal mask sliced from a 128x128 buffer built in __init__; past T = 128 the slice is too small and SDPA raises on the mask shape.
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    block_size = 128

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        n = self.block_size
        self.register_buffer("tril", torch.tril(torch.ones(n, n)).bool().view(1, 1, n, n))

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.size()
        hs = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)
        mask = self.tril[:, :, :T, :T]
        if key_padding_mask is not None:
            mask = mask & key_padding_mask.view(B, 1, 1, T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)
