import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.dim = dim
        self.proj = nn.Linear(dim, dim)
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x, key_padding_mask=None):
        bsz, n, _ = x.shape
        pos = torch.arange(n, device=x.device)
        qpos = pos.view(n, 1)
        kpos = pos.view(1, n)
        see = kpos <= qpos
        if key_padding_mask is not None:
            real = key_padding_mask.sum(dim=1)
            see = see & (kpos < real.view(bsz, 1, 1)).unsqueeze(1)
        nh = self.n_heads
        hs = self.dim // nh
        a, b, c = torch.split(self.qkv(x), [self.dim, self.dim, self.dim], dim=2)
        a = a.view(bsz, n, nh, hs).transpose(1, 2)
        b = b.view(bsz, n, nh, hs).transpose(1, 2)
        c = c.view(bsz, n, nh, hs).transpose(1, 2)
        w = F.softmax((a @ b.transpose(2, 3) / math.sqrt(hs)).masked_fill(~see, float("-inf")), dim=3)
        return self.proj((w @ c).transpose(1, 2).reshape(bsz, n, self.dim))
