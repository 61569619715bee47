# bug: wrong_head_split
# Heads are split with reshape(B, nh, T, hs) directly instead of reshape(B, T, nh, hs).transpose(1, 2).
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
        q = q.reshape(B, nh, T, hs)
        k = k.reshape(B, nh, T, hs)
        v = v.reshape(B, nh, T, hs)

        mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            mask = mask[None, None, :, :] & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).reshape(B, T, D)
        return self.proj(y)
