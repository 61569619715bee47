# bug: wrong_head_merge
# Per-head outputs are stacked to (B, H, T, hd) and joined with permute(0, 2, 3, 1), which flattens each position's features head_dim-major (d * H + h) instead of head-major.
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril().unsqueeze(0)
        if key_padding_mask is not None:
            keep = keep & key_padding_mask.unsqueeze(1)
        heads = []
        for h in range(self.n_heads):
            qh = q[:, :, h * hd:(h + 1) * hd]
            kh = k[:, :, h * hd:(h + 1) * hd]
            vh = v[:, :, h * hd:(h + 1) * hd]
            s = torch.bmm(qh, kh.transpose(1, 2)) / math.sqrt(hd)
            s = s.masked_fill(~keep, float("-inf"))
            heads.append(torch.bmm(s.softmax(-1), vh))
        y = torch.stack(heads, dim=1)                      # (B, H, T, hd)
        y = y.permute(0, 2, 3, 1).reshape(B, T, C)
        return self.proj(y)
