# bug: view_without_contiguous
# The SDPA output is transposed and .view()-ed without .contiguous(); this only works because the default CPU kernel returns a (B, T, nh, hs) layout, and it raises under the MATH backend.
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
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = y.transpose(1, 2).view(B, T, D)
        return self.proj(y)
