import math
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 -- fixture: the student's code as written


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super(CausalSelfAttention, self).__init__()  # noqa: UP008 -- fixture: the student's code as written
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.d_model = dim
        self.h = n_heads
        self.dk = dim // n_heads

    def forward(self, x, key_padding_mask=None):
        length = x.size(1)
        projected = self.qkv(x)
        queries = projected[:, :, 0 : self.d_model]
        keys = projected[:, :, self.d_model : 2 * self.d_model]
        values = projected[:, :, 2 * self.d_model : 3 * self.d_model]

        hidden = torch.triu(torch.ones(length, length, device=x.device), diagonal=1).bool()
        hidden = hidden.unsqueeze(0)
        if key_padding_mask is not None:
            hidden = hidden | (~key_padding_mask).unsqueeze(1)

        outs = []
        for i in range(self.h):
            sl = slice(i * self.dk, (i + 1) * self.dk)
            qi, ki, vi = queries[:, :, sl], keys[:, :, sl], values[:, :, sl]
            sc = (qi @ ki.transpose(1, 2)) / math.sqrt(self.dk)
            sc = sc.masked_fill(hidden, float("-inf"))
            outs.append(sc.softmax(dim=-1) @ vi)
            count = len(outs)  # noqa: F841 -- fixture: the student's code as written
        return self.proj(torch.cat(outs, dim=-1))
