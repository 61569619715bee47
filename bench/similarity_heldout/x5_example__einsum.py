import math
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"dim {dim} not divisible by heads {n_heads}")
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = q.view(B, T, H, hd).transpose(1, 2), k.view(B, T, H, hd).transpose(1, 2), v.view(B, T, H, hd).transpose(1, 2)
        scores = torch.einsum("bhtd,bhsd->bhts", q, k) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        # print(scores.shape)
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)
        out = torch.einsum("bhts,bhsd->bhtd", weights, v)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
