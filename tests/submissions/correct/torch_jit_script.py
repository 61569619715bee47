# A correct layer whose attention core is a TorchScript function (@torch.jit.script) and whose
# projections run in a scripted module: TorchScript parses this file's source, and nn.Linear's and
# nn.Dropout's from torch, at run time.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.jit.script
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])        # (B, H, T, T)
    weights = F.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return weights @ v                                                  # (B, H, T, hd)


class Dropped(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x).softmax(-1) * 0 + x


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self._dropped = [torch.jit.script(Dropped())]   # scripted, kept outside the module's children

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        hd = C // self.n_heads
        qkv = self.qkv(x).view(B, T, 3, self.n_heads, hd).permute(2, 0, 3, 1, 4)  # (3, B, H, T, hd)
        q, k, v = qkv[0], qkv[1], qkv[2]
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()[None, None]
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        out = attend(q, k, v, allowed)
        return self._dropped[0](self.proj(out.transpose(1, 2).reshape(B, T, C)))
