# bug: no_causal_mask
# Sequences longer than 16 are processed in blocks of 16 queries; the leftover last block gets only the padding mask, so its positions see the future: wrong when T > 16 and T % 16 >= 2 (e.g. T = 18, 20, 40), right for T <= 16, for T = 17, 33 and for multiples of 16.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, block=16):
        super().__init__()
        self.n_heads = n_heads
        self.block = block
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def _attend(self, q, k, v, allowed):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.reshape(B, T, H, C // H).transpose(1, 2)
        k = k.reshape(B, T, H, C // H).transpose(1, 2)
        v = v.reshape(B, T, H, C // H).transpose(1, 2)

        pad = torch.ones(B, 1, 1, T, dtype=torch.bool, device=x.device)
        if key_padding_mask is not None:
            pad = key_padding_mask[:, None, None, :]
        if T <= self.block:
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            out = self._attend(q, k, v, causal & pad)
        else:
            pieces = []
            full = T - T % self.block
            for s in range(0, full, self.block):
                rows = torch.arange(s, s + self.block, device=x.device)[:, None]
                causal = torch.arange(T, device=x.device)[None, :] <= rows
                pieces.append(self._attend(q[:, :, s:s + self.block], k, v, causal & pad))
            if full < T:  # the rest of the sequence
                pieces.append(self._attend(q[:, :, full:], k, v, pad))
            out = torch.cat(pieces, dim=2)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
