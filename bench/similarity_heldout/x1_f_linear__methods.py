import math
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 -- fixture: the student's code as written


def _unused_helper(t):
    # kept from an earlier attempt
    return t.float().mean()


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.width = dim
        self.nheads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        batch, steps, _ = x.shape
        nh = self.nheads
        d = self.width // nh
        mixed = self.qkv(x)
        query, key, value = mixed.split(self.width, dim=-1)
        query = query.reshape(batch, steps, nh, d).transpose(1, 2)
        key = key.reshape(batch, steps, nh, d).transpose(1, 2)
        value = value.reshape(batch, steps, nh, d).transpose(1, 2)
        logits = query @ key.transpose(-2, -1) / math.sqrt(d)
        visible = torch.ones((steps, steps), dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            visible = (visible.unsqueeze(0) & key_padding_mask.unsqueeze(1)).unsqueeze(1)
        logits = logits.masked_fill(~visible, float("-inf"))
        attn = logits.softmax(dim=-1)
        result = (attn @ value).transpose(1, 2).flatten(2)
        return self.proj(result)
