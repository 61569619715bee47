import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, dim, n_heads):
        super().__init__()
        assert dim % n_heads == 0
        # key, query, value projections for all heads, but in a batch
        self.qkv = nn.Linear(dim, 3 * dim)
        # output projection
        self.proj = nn.Linear(dim, dim)
        self.n_head = n_heads
        self.n_embd = dim

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)

        # calculate query, key, values for all heads in batch and move head forward to be the batch dim
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)

        # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        bias = torch.tril(torch.ones(T, T, device=x.device)).view(1, 1, T, T)  # (1, 1, T, T)
        att = att.masked_fill(bias == 0, float('-inf'))
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask.view(B, 1, 1, T) == 0, float('-inf'))  # (B, 1, 1, T)
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B, nh, T, T) x (B, nh, T, hs) -> (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side

        # output projection
        y = self.proj(y)
        return y
