import math
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.hd = dim // n_heads
        self.nh = n_heads
        self.register_buffer("mask", torch.ones(0, 0, dtype=torch.bool), persistent=False)

    def _causal(self, n, device):
        if self.mask.size(0) < n or self.mask.device != device:
            self.mask = torch.ones(n, n, dtype=torch.bool, device=device).tril()
        return self.mask[:n, :n]

    def forward(self, x, key_padding_mask=None):
        b, n, c = x.shape
        debug_shape = x.shape  # noqa: F841 -- fixture: the student's code as written
        dims = (b, n, self.nh, self.hd)
        q, k, v = (t.reshape(dims).transpose(1, 2) for t in self.qkv(x).split(c, dim=-1))
        ok = self._causal(n, x.device)[None, None]
        if key_padding_mask is not None:
            ok = ok & key_padding_mask[:, None, None, :]
        sc = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)
        w = sc.masked_fill(~ok, -math.inf).softmax(dim=-1)
        return self.proj(torch.matmul(w, v).transpose(1, 2).reshape(b, n, c))
