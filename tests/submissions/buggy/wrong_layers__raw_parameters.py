# bug: wrong_layers
# The projections are raw nn.Parameter matrices (W_qkv, b_qkv, W_o, b_o) used with F.linear, not the nn.Linear layers self.qkv and self.proj the exercise asks for.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        bound = 1 / math.sqrt(dim)
        self.W_qkv = nn.Parameter(torch.empty(3 * dim, dim).uniform_(-bound, bound))
        self.b_qkv = nn.Parameter(torch.empty(3 * dim).uniform_(-bound, bound))
        self.W_o = nn.Parameter(torch.empty(dim, dim).uniform_(-bound, bound))
        self.b_o = nn.Parameter(torch.empty(dim).uniform_(-bound, bound))

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        hd = C // H
        q, k, v = F.linear(x, self.W_qkv, self.b_qkv).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)
        return F.linear(out, self.W_o, self.b_o)
