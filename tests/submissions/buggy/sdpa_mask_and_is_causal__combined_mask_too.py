# bug: sdpa_mask_and_is_causal
# The hand-combined causal and padding mask is passed to SDPA and is_causal=True is set as well "to be safe"; the default CPU kernel accepts it, the math backend and GPU kernels raise.
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
        B, T, C = x.shape
        nh = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, nh, C // nh).transpose(1, 2)
        k = k.view(B, T, nh, C // nh).transpose(1, 2)
        v = v.view(B, T, nh, C // nh).transpose(1, 2)

        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
