# isolation: graded several times in a row, warm and cold. It aims at kernel state that a process
# of the same user can change and that outlives it: a key in the user's and the session's kernel
# keyrings (which outlive every process, so they would reach later grades, warm or cold), the I/O
# priority of the zygote it was forked from (idle: every later worker would inherit it and run
# starved), and a POSIX message queue (it outlives its process in the IPC namespace a warm sandbox
# keeps). At import it looks for what an earlier grade left of these and raises, naming it, if it
# finds any; then it plants all of them itself. A plant the sandbox refuses is the protection
# working; one that takes must not be seen by the next grade.
import ctypes
import hashlib
import os
import platform

import torch
import torch.nn as nn

MARK = "leftover-mark-7f3a"
TAG = hashlib.sha256(os.getcwd().encode()).hexdigest()[:12]   # this grade
QUEUE = f"/{MARK}-queue".encode()
IDLE = 3 << 13                                                 # IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0)
NR = {"x86_64": {"add_key": 248, "ioprio_get": 252, "ioprio_set": 251},
      "aarch64": {"add_key": 217, "ioprio_get": 31, "ioprio_set": 30}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)


def keys() -> list[str]:
    """Marked keys this process can see, in any of its keyrings."""
    try:
        with open("/proc/keys") as f:
            return [line.split(None, 8)[-1].rsplit(":", 1)[0] for line in f if MARK in line]
    except OSError:
        return []


def queue_tags() -> list[str]:
    fd = libc.mq_open(QUEUE, os.O_RDONLY | os.O_NONBLOCK)
    if fd < 0:
        return []
    buffer = ctypes.create_string_buffer(1 << 16)
    found = []
    while libc.mq_receive(fd, buffer, len(buffer), None) > 0:
        found.append(buffer.value.decode())
    libc.mq_close(fd)
    return found


earlier = [f"a kernel key of an earlier grade ({k})" for k in keys() if TAG not in k]
if libc.syscall(NR["ioprio_get"], 1, 0) == IDLE:
    earlier.append("an idle I/O priority inherited from the zygote, set by an earlier grade")
earlier += [f"a message queue of an earlier grade ({t})" for t in queue_tags() if t != TAG]
if earlier:
    raise RuntimeError(f"found what an earlier submission left: {', '.join(earlier)}")

for keyring in (-4, -3):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_SESSION_KEYRING
    libc.syscall(NR["add_key"], b"user", f"{MARK}-{TAG}".encode(), b"left", 4, keyring)
libc.syscall(NR["ioprio_set"], 1, os.getppid(), IDLE)   # the zygote (the worker's parent)
_fd = libc.mq_open(QUEUE, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK, 0o600, None)
if _fd >= 0:
    libc.mq_send(_fd, TAG.encode(), len(TAG), 0)
    libc.mq_close(_fd)


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
