# bug: wrong_head_merge
# out.squeeze(0) (meant for unbatched input) folds away the batch dimension when B == 1, so the following transpose(1, 2) swaps positions with head_dim instead of heads with positions: wrong for B = 1 with T > 1 (any n_heads), right for B > 1.
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
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        out = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v
        out = out.squeeze(0)  # drop the batch axis for a single sequence
        out = out.transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
