import math
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
        B, T, _ = x.shape
        H = self.n_heads
        hd = self.dim // H
        # same as self.qkv(x), written out with the functional API
        qkv = F.linear(x, self.qkv.weight, self.qkv.bias)
        q, k, v = torch.split(qkv, self.dim, dim=-1)
        q = torch.transpose(q.reshape(B, T, H, hd), 1, 2)
        k = torch.transpose(k.reshape(B, T, H, hd), 1, 2)
        v = torch.transpose(v.reshape(B, T, H, hd), 1, 2)

        scores = torch.matmul(q, torch.transpose(k, -2, -1)) / math.sqrt(hd)
        allow = torch.tril(torch.ones((T, T), dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            allow = torch.logical_and(allow.unsqueeze(0), key_padding_mask.unsqueeze(1)).unsqueeze(1)
        scores = torch.masked_fill(scores, torch.logical_not(allow), float("-inf"))
        p = torch.softmax(scores, dim=-1)
        out = torch.matmul(p, v).transpose(1, 2).flatten(2)
        return F.linear(out, self.proj.weight, self.proj.bias)
