import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.d_model = dim
        self.heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, _ = x.shape
        per_head = self.d_model // self.heads
        Q, K, V = self.qkv(x).split(self.d_model, dim=-1)
        Q = Q.reshape(B, T, self.heads, per_head).transpose(1, 2)
        K = K.reshape(B, T, self.heads, per_head).transpose(1, 2)
        V = V.reshape(B, T, self.heads, per_head).transpose(1, 2)
        allowed = torch.ones(B, 1, T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask.reshape(B, 1, 1, T)
        S = Q @ K.transpose(-1, -2) / math.sqrt(per_head)
        P = S.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        P = torch.where(allowed.any(dim=-1, keepdim=True), P, torch.zeros_like(P))  # fully masked rows -> 0
        return self.proj((P @ V).transpose(1, 2).reshape(B, T, self.d_model))
