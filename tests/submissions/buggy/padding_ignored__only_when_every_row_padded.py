# bug: padding_ignored
# The padding mask is applied only when every sequence in the batch has some padding; a batch with one full sequence skips it for all sequences.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.nh = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.nh
        q, k, v = self.qkv(x).view(B, T, 3, self.nh, hd).permute(2, 0, 3, 1, 4)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device)).expand(B, 1, T, T)
        if key_padding_mask is not None:
            every_sequence_padded = bool((~key_padding_mask).any(dim=1).all())
            if every_sequence_padded:
                allowed = allowed & key_padding_mask[:, None, None, :]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
