import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, dim, n_heads):
        super().__init__()
        assert dim % n_heads == 0
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.n_head = n_heads
        self.n_embd = dim

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.size()
        hs = C // self.n_head
        proj_all = self.qkv(x)
        q, k, v = proj_all.split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, hs)
        k = k.transpose(1, 2)
        q = q.view(B, T, self.n_head, hs)
        q = q.transpose(1, 2)
        v = v.view(B, T, self.n_head, hs)
        v = v.transpose(1, 2)
        kt = k.transpose(-2, -1)
        att = q @ kt
        scale = 1.0 / math.sqrt(k.size(-1))
        att = att * scale
        ones = torch.ones(T, T, device=x.device)
        bias = torch.tril(ones)
        bias = bias.view(1, 1, T, T)
        att = att.masked_fill(bias == 0, float('-inf'))
        if key_padding_mask is not None:
            pad = key_padding_mask.view(B, 1, 1, T)
            att = att.masked_fill(pad == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2)
        y = y.contiguous()
        y = y.view(B, T, C)
        y = self.proj(y)
        return y
