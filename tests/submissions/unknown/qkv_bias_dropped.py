# unknown: q, k and v are computed with F.linear(x, self.qkv.weight) and the bias of self.qkv is left out
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

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        W_q, W_k, W_v = self.qkv.weight.split(C, dim=0)
        q = F.linear(x, W_q).view(B, T, H, C // H).transpose(1, 2)
        k = F.linear(x, W_k).view(B, T, H, C // H).transpose(1, 2)
        v = F.linear(x, W_v).view(B, T, H, C // H).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
