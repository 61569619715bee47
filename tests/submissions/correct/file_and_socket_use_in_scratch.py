# Correct, and does with files and sockets what honest code may: the honest twin of the host attacks
# (tests/submissions/attacks/host_*). It saves and loads a checkpoint in its working folder, makes a
# temporary file, reads its own source, looks at (stats) a host file, lists its folder, and talks to
# itself over a socketpair.
import math
import os
import socket
import tempfile

import torch
import torch.nn as nn

with open(__file__) as _own:
    assert "CausalSelfAttention" in _own.read()
os.stat("/etc/hostname" if os.path.exists("/etc/hostname") else "/")
_left, _right = socket.socketpair()
_left.sendall(b"ping")
assert _right.recv(4) == b"ping"
_left.close()
_right.close()
with tempfile.NamedTemporaryFile("w", suffix=".txt") as _tmp:
    _tmp.write("scratch")
    _tmp.flush()
torch.save({"w": torch.ones(2)}, "checkpoint.pt")
assert torch.load("checkpoint.pt")["w"].sum() == 2
os.remove("checkpoint.pt")
os.listdir(".")


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        H, hd = self.n_heads, self.head_dim
        q, k, v = self.qkv(x).split(C, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
