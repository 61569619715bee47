# A layer that uses torch.compile for a helper but whose forward loops forever outside it: the
# compile hook must not turn an infinite loop into a long wait.
import torch
import torch.nn as nn


@torch.compile
def scale(x):
    return x * 2


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        while True:
            pass
