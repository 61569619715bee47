# bug: breaks_autograd
# The attention map is kept as a detached copy for plotting and that copy is what multiplies v, so no gradient reaches q and k (the forward values are right).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.last_attention = None  # for visualising the heads in the notebook

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)

        att = q @ k.transpose(-2, -1) / math.sqrt(hd)
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        att = att.masked_fill(~causal, float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(~key_padding_mask[:, None, None, :], float("-inf"))
        self.last_attention = F.softmax(att, dim=-1).detach()
        y = self.last_attention @ v
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
