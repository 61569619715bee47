import torch
from torch import nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    """My attention layer (written for the assignment)."""
    def __init__(self, dim, n_heads):
        super().__init__()
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)

        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        batch, length, width = x.shape
        nh = self.heads
        size = width // nh
        query, key, value = self.qkv(x).split(width, dim=-1)
        value = value.reshape(batch, length, nh, size).transpose(1, 2)
        query = query.reshape(batch, length, nh, size).transpose(1, 2)
        key = key.reshape(batch, length, nh, size).transpose(1, 2)
        # which keys each query can see
        allowed = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        allowed = allowed.view(1, 1, length, length)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.bool().view(batch, 1, 1, length)
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed)
        out = out.transpose(1, 2).reshape(batch, length, width)
        return self.proj(out)
