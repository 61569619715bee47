# bug: sdpa_mask_and_is_causal
# An additive float padding mask is passed to SDPA together with is_causal=True.
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, H, T, hd) each
        bias = None
        if key_padding_mask is not None:
            bias = torch.zeros(B, 1, 1, T, dtype=x.dtype, device=x.device)
            bias = bias.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
