import math
import torch
import torch.nn as nn


def softmax_where(s, ok):
    # stable softmax restricted to ok entries
    s = s.masked_fill(torch.logical_not(ok), float("-inf"))
    m = torch.amax(s, dim=-1, keepdim=True).detach()
    num = (s - m).exp()
    return num / torch.sum(num, dim=-1, keepdim=True)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.n_heads = n_heads

    def forward(self, x, key_padding_mask=None):
        Bs, Ts, Cs = x.shape
        nh = self.n_heads
        d = Cs // nh
        a, b, c = self.qkv(x).split(Cs, dim=-1)
        a = a.reshape(Bs, Ts, nh, d).transpose(1, 2)
        b = b.reshape(Bs, Ts, nh, d).transpose(1, 2)
        c = c.reshape(Bs, Ts, nh, d).transpose(1, 2)
        s = torch.matmul(a, b.mT) / math.sqrt(d)
        ok = torch.ones(Ts, Ts, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        p = softmax_where(s, ok)
        o = torch.matmul(p, c).transpose(1, 2).reshape(Bs, Ts, Cs)
        return self.proj(o)
