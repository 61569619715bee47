"""Causal self-attention built from small functions, so each step can be tested on its own."""
import math

import torch
from torch import nn


def split_heads(t, n_heads):
    """(B, T, C) -> (B, n_heads, T, C // n_heads)"""
    B, T, C = t.shape
    return t.view(B, T, n_heads, C // n_heads).transpose(1, 2)


def merge_heads(t):
    """(B, n_heads, T, hd) -> (B, T, n_heads * hd)"""
    B, H, T, hd = t.shape
    return t.transpose(1, 2).reshape(B, T, H * hd)


def allowed_keys(T, key_padding_mask, device):
    """(B or 1, 1, T, T) bool: True where query t may look at key s."""
    allowed = torch.ones(T, T, dtype=torch.bool, device=device).tril()[None, None]
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    return allowed


def attend(q, k, v, allowed):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(allowed.logical_not(), float("-inf"))
    return scores.softmax(dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))
        allowed = allowed_keys(x.shape[1], key_padding_mask, x.device)
        return self.proj(merge_heads(attend(q, k, v, allowed)))
