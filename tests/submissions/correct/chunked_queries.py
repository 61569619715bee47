import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    """Queries are processed in blocks of 16 to bound the size of the score matrix."""

    block = 16

    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)

        positions = torch.arange(T, device=x.device)
        pieces = []
        for start in range(0, T, self.block):
            stop = min(start + self.block, T)
            # the block's queries only ever need keys up to stop - 1
            scores = q[:, :, start:stop] @ k[:, :, :stop].transpose(-2, -1) / math.sqrt(hd)
            ok = positions[None, :stop] <= positions[start:stop, None]        # (rows, stop)
            if key_padding_mask is not None:
                ok = ok & key_padding_mask[:, None, None, :stop]
            scores = scores.masked_fill(~ok, float("-inf"))
            pieces.append(scores.softmax(dim=-1) @ v[:, :, :stop])
        out = torch.cat(pieces, dim=2)                                         # (B, H, T, hd)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
