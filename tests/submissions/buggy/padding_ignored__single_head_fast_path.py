# bug: padding_ignored
# A "fast path" for n_heads == 1 calls SDPA with is_causal=True and drops key_padding_mask; the multi-head path is right. Only n_heads = 1 with padding differs (at the padded query positions).
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

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        if self.n_heads == 1:
            # single head: no reshaping needed, let SDPA do the causal part
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y)

        H, hd = self.n_heads, C // self.n_heads
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
