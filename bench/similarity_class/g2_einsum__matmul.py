import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.nh = n_heads
        self.hd = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        bs, ln, ch = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(bs, ln, self.nh, self.hd)
        k = k.reshape(bs, ln, self.nh, self.hd)
        v = v.reshape(bs, ln, self.nh, self.hd)

        att = torch.matmul(q.transpose(1, 2), k.transpose(1, 2).transpose(-2, -1)) / math.sqrt(self.hd)

        idx = torch.arange(ln, device=x.device)
        ok = idx[None, :] <= idx[:, None]
        ok = ok[None, None]
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        att = att.masked_fill(~ok, -math.inf)
        att = att.softmax(dim=-1)

        y = torch.matmul(att, v.transpose(1, 2)).transpose(1, 2).reshape(bs, ln, ch)
        return self.proj(y)
