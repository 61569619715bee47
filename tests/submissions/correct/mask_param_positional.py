import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, inputs, mask=None):
        # `mask` is the key padding mask, (B, T) bool, True = real token
        B, T, C = inputs.shape
        H = self.n_heads
        q, k, v = self.qkv(inputs).split(C, dim=-1)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)

        att = q.matmul(k.transpose(-2, -1)).div(math.sqrt(C // H))
        visible = torch.ones(T, T, dtype=torch.bool, device=inputs.device).tril()
        if mask is not None:
            visible = visible & mask.view(B, 1, 1, T)
        att = att.masked_fill(~visible, float("-inf")).softmax(dim=-1)
        out = att.matmul(v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
