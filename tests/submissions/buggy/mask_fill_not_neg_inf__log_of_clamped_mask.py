# bug: mask_fill_not_neg_inf
# The mask enters as log(mask.clamp(min=1e-9)): blocked scores get about -20.7 added, never -inf; kept ones exactly 0.
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
        hs = C // self.nh
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(B, T, self.nh, hs).transpose(1, 2)
        k = k.view(B, T, self.nh, hs).transpose(1, 2)
        v = v.view(B, T, self.nh, hs).transpose(1, 2)
        blocked = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)[None, None]
        if key_padding_mask is not None:
            blocked = blocked | ~key_padding_mask[:, None, None, :]
        keep = (~blocked).to(x.dtype)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs) + torch.log(keep.clamp(min=1e-9))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
