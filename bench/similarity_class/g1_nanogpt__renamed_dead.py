import math
import torch
import torch.nn as nn
from torch.nn import functional as F

DEBUG = False


class CausalSelfAttention(nn.Module):
    """Attention for my transformer homework."""

    def __init__(self, dim, n_heads):
        super().__init__()
        assert dim % n_heads == 0
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads = n_heads
        self.width = dim
        self.unused_scale = 1.0

    def forward(self, inp, key_padding_mask=None):
        nb, nt, nc = inp.size()
        tmp = nb * nt  # not needed  # noqa: F841 -- fixture: the student's code as written
        query, key, val = self.qkv(inp).split(self.width, dim=2)
        key = key.view(nb, nt, self.heads, nc // self.heads).transpose(1, 2)
        query = query.view(nb, nt, self.heads, nc // self.heads).transpose(1, 2)
        val = val.view(nb, nt, self.heads, nc // self.heads).transpose(1, 2)
        if DEBUG:
            print("shapes", query.shape, key.shape)
        scores = (query @ key.transpose(-2, -1)) * (1.0 / math.sqrt(key.size(-1)))
        tri = torch.tril(torch.ones(nt, nt, device=inp.device)).view(1, 1, nt, nt)
        scores = scores.masked_fill(tri == 0, float('-inf'))
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.view(nb, 1, 1, nt) == 0, float('-inf'))
        scores = F.softmax(scores, dim=-1)
        extra = scores.sum()  # sanity check, left in  # noqa: F841 -- fixture: the student's code as written
        out = scores @ val
        out = out.transpose(1, 2).contiguous().view(nb, nt, nc)
        out = self.proj(out)
        return out
        print("done")
