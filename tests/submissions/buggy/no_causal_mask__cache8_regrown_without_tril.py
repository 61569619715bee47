# bug: no_causal_mask
# The 8x8 causal cache is regrown for T > 8 as torch.ones(T, T) with the .tril() forgotten: sequences longer than 8 lose the causal mask (padding is still applied), and so does every later call once one has been seen.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads, block_size=8):
        super().__init__()
        self.n_head = n_heads
        self.n_embd = dim
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size),
                             persistent=False)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.size()
        if T > self.bias.size(-1):
            self.bias = torch.ones(T, T, device=x.device).view(1, 1, T, T)
        q, k, v = self.qkv(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        if key_padding_mask is not None:
            att = att.masked_fill(key_padding_mask[:, None, None, :] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)
