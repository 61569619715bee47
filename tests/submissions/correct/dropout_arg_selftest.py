"""Causal self-attention for the homework, with an (unused by default) dropout knob."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, dropout=0.0, bias=True):
        super().__init__()
        if dim % n_heads != 0:
            raise ValueError(f"dim={dim} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)
        self.attn_drop = nn.Dropout(dropout)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))

        att = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        att = att.masked_fill(~mask, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


if __name__ == "__main__":
    torch.manual_seed(0)
    dim, heads, B, T = 24, 4, 2, 6
    attn = CausalSelfAttention(dim, heads).eval()
    x = torch.randn(B, T, dim)
    kpm = torch.tensor([[True] * 6, [True] * 3 + [False] * 3])

    mha = nn.MultiheadAttention(dim, heads, batch_first=True).eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.qkv.weight)
        mha.in_proj_bias.copy_(attn.qkv.bias)
        mha.out_proj.weight.copy_(attn.proj.weight)
        mha.out_proj.bias.copy_(attn.proj.bias)
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    ref = mha(x, x, x, attn_mask=causal, key_padding_mask=~kpm, need_weights=False)[0]
    out = attn(x, kpm)
    print("max abs diff vs nn.MultiheadAttention:", (out - ref).abs().max().item())
    print("params:", sum(p.numel() for p in attn.parameters()), "expected", 4 * dim * dim + 4 * dim)
