# isolation: graded after leave_behind.py in the same warm sandbox; raises at import, naming
# what it found, if anything of an earlier submission is still there.
import json
import os
import subprocess
import sys
import tempfile
import types

import torch
import torch.nn as nn

MARK = "leftover-mark-5c1e"


def daemon_alive() -> bool:
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if MARK.encode() in f.read():
                        return True
            except OSError:
                pass
    return False


def files_found() -> list[str]:
    places = {os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), "/dev/shm"}
    found = []
    for place in places:
        try:
            found += [os.path.join(place, n) for n in os.listdir(place) if MARK in n]
        except OSError:
            pass
    return found


def state_found() -> list[str]:
    found = []
    if os.environ.get("LEFTOVER_MARK"):
        found.append("environment variable LEFTOVER_MARK")
    if hasattr(torch, "LEFTOVER_MARK") or hasattr(json, "LEFTOVER_MARK"):
        found.append("module attribute LEFTOVER_MARK")
    if MARK in sys.modules:
        found.append("sys.modules entry")
    return found


_found = (["a process of an earlier submission"] if daemon_alive() else []) + files_found() + state_found()
if _found:
    raise RuntimeError(f"found what an earlier submission left: {', '.join(_found)}")


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (C // self.n_heads) ** 0.5
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        if key_padding_mask is not None:
            mask = mask & key_padding_mask[:, None, None, :]
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.nan_to_num(scores.softmax(dim=-1)) @ v
        return self.proj(out.transpose(1, 2).reshape(B, T, C))
