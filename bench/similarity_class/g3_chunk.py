import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, dim, n_heads):
        super().__init__()
        self.num_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        batch, seq_len, dim = x.size()
        head_dim = dim // self.num_heads

        query, key, value = self.qkv(x).chunk(3, dim=-1)
        query = query.reshape(batch, seq_len, self.num_heads, head_dim).transpose(1, 2)
        key = key.reshape(batch, seq_len, self.num_heads, head_dim).transpose(1, 2)
        value = value.reshape(batch, seq_len, self.num_heads, head_dim).transpose(1, 2)

        logits = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(head_dim)

        future = torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool, device=x.device), diagonal=1)
        logits = logits.masked_fill(future, float("-inf"))
        if key_padding_mask is not None:
            is_pad = key_padding_mask.logical_not()[:, None, None, :]
            logits = logits.masked_fill(is_pad, float("-inf"))

        attention = F.softmax(logits, dim=-1)
        context = torch.matmul(attention, value)
        context = context.transpose(1, 2).reshape(batch, seq_len, dim)
        return self.proj(context)
