# bug: fixed_max_length
# The causal mask is built once for block_size=16, so any T > 16 breaks.
import math
import torch
import torch.nn as nn

BLOCK_SIZE = 16


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer(
            "causal", torch.ones(BLOCK_SIZE, BLOCK_SIZE, dtype=torch.bool).tril(), persistent=False
        )

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in self.qkv(x).split(C, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)
        allowed = self.causal[:T, :T].expand(B, 1, T, T)
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
