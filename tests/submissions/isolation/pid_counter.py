# isolation: graded several times in a row by one warm slot. It aims at the one piece of kernel
# state every process reads without asking: the PID counter of its PID namespace. A grade that
# forks until the counter reads a chosen value sets what the next student's worker sees as its
# own PID (and as the last PID in /proc/loadavg): a channel from one student to the next that
# no file and no process left behind carries. At its first import in a grade it raises, naming
# the numbers, if its PID or the last PID handed out is past what its own grade could have used
# (an earlier grade moved the counter); then it moves the counter SPIN steps on itself.
import os

import torch
import torch.nn as nn

SPIN = 300
DONE = "pid-counter-spun"   # in this grade's scratch folder: the grade's later workers skip both


def last_pid() -> int:
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError):
        return -1


if not os.path.exists(DONE):
    mine, last = os.getpid(), last_pid()
    if mine > SPIN or last > SPIN:
        raise RuntimeError(f"found what an earlier submission left: the PID counter at {max(mine, last)} "
                           f"(this worker's PID {mine}, the last handed out {last})")
    for _ in range(SPIN + 20):
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)
    with open(DONE, "w") as f:
        f.write(str(last_pid()))


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
