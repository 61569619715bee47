import math
import torch
import torch.nn as nn


def masked_softmax(scores, allowed):
    """Softmax over the last axis where only `allowed` entries take part.

    Subtract the row maximum (taken over allowed entries only) for stability;
    every row has at least one allowed entry here (the key at position 0),
    so the maximum is finite and exp(-inf - max) is exactly 0.
    """
    scores = scores.masked_fill(~allowed, float("-inf"))
    row_max = scores.amax(dim=-1, keepdim=True).detach()
    e = torch.exp(scores - row_max)
    return e / e.sum(dim=-1, keepdim=True)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H = self.n_heads
        hd = C // H
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)

        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        w = masked_softmax(scores, allowed)

        y = (w @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)
