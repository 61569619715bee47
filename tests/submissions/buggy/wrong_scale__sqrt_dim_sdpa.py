# bug: wrong_scale
# SDPA is given scale=1/sqrt(dim) instead of the default 1/sqrt(head_dim).
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
        hs = D // nh
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(B, T, nh, hs).transpose(1, 2)
        k = k.reshape(B, T, nh, hs).transpose(1, 2)
        v = v.reshape(B, T, nh, hs).transpose(1, 2)

        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            mask = mask[None, None, :, :] & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=D ** -0.5)
        y = y.transpose(1, 2).reshape(B, T, D)
        return self.proj(y)
