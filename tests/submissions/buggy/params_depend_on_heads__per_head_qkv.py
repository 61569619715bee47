# bug: params_depend_on_heads
# self.qkv is a ModuleList with one nn.Linear(dim, 3*dim) per head, so parameters scale with n_heads.
import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.dim = dim
        self.n_heads = n_heads
        # one q/k/v projection per head
        self.qkv = nn.ModuleList([nn.Linear(dim, 3 * dim) for _ in range(n_heads)])
        self.proj = nn.Linear(n_heads * dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        outs = []
        for layer in self.qkv:
            q, k, v = layer(x).split(C, dim=-1)
            scores = q @ k.transpose(-2, -1) / math.sqrt(C)
            scores = scores.masked_fill(future, float("-inf"))
            if key_padding_mask is not None:
                scores = scores.masked_fill(~key_padding_mask[:, None, :], float("-inf"))
            outs.append(scores.softmax(dim=-1) @ v)
        return self.proj(torch.cat(outs, dim=-1))
