# unknown: the key mask is rebuilt from the lengths as if padding were on the left (the last n positions real), so padded sequences attend to their padding and lose their first real tokens
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
        H = self.n_heads
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        if key_padding_mask is not None:
            n_real = key_padding_mask.sum(dim=1, keepdim=True)                 # (B, 1)
            pos = torch.arange(T, device=x.device)[None, :]
            real = pos >= T - n_real                                         # pad tokens come first
            scores = scores.masked_fill(~real[:, None, None, :], float("-inf"))
        weights = scores.softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
