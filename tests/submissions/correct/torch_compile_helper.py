# A correct layer that compiles only its attention core, a module-level helper, with torch.compile.
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.compile(dynamic=True)
def attend(q, k, v, allowed):
    scale = q.shape[-1] ** -0.5
    scores = (q @ k.transpose(-2, -1)) * scale
    return F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        out = attend(q, k, v, allowed)
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
