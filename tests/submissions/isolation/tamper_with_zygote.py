# isolation: graded several times in a row in the same warm sandbox. Its workers share a user with
# the zygote that forks them, so they may lower its resource limits (prlimit) and its priority,
# which the next submission's workers would inherit (the priority is refused in some sandboxes).
# At import it looks for such a change made by an
# earlier grade (each grade writes its own tag into the open-files limit) and raises if it finds one;
# then it makes the change itself, and raises if that did not take.
import hashlib
import os
import resource

import torch
import torch.nn as nn

TAG = 700 + int(hashlib.sha256(os.getcwd().encode()).hexdigest()[:8], 16) % 200   # this grade's value

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)   # inherited from the zygote
if 700 <= soft < 900 and soft != TAG or os.getpriority(os.PRIO_PROCESS, 0) == 19 and soft != TAG:
    raise RuntimeError(f"the zygote was changed by an earlier grade: open files {soft}, "
                       f"priority {os.getpriority(os.PRIO_PROCESS, 0)}")
zygote = os.getppid()
try:
    resource.prlimit(zygote, resource.RLIMIT_NOFILE, (TAG, hard))
    changed = True
except PermissionError:  # the local sandbox as root: its workers hold a uid of their own, not the zygote's
    changed = False
if changed:
    try:
        os.setpriority(os.PRIO_PROCESS, zygote, 19)
    except PermissionError:
        pass  # refused where the zygote is PID 1 of a namespace; the limit is enough
    if resource.prlimit(zygote, resource.RLIMIT_NOFILE)[0] != TAG:
        raise RuntimeError("could not change the zygote")


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
