import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.scale = 1.0 / math.sqrt(self.head_dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, D = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.reshape(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
        k = k.reshape(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
        v = v.reshape(B, T, H, D).transpose(1, 2).reshape(B * H, T, D)
        bias = torch.full((T, T), float("-inf"), dtype=x.dtype, device=x.device).triu(1)
        bias = bias.expand(B * H, T, T).clone()
        if key_padding_mask is not None:
            bias = bias.masked_fill(~key_padding_mask.repeat_interleave(H, dim=0)[:, None, :], float("-inf"))
        attn = torch.softmax(torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=self.scale), dim=-1)
        y = torch.bmm(attn, v).view(B, H, T, D).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
