# isolation: graded several times in a row in the same warm sandbox. At import it first looks for
# anything an earlier submission left (a process, a System V shared memory segment, files, an
# environment variable, changed module state) and raises, naming it, if it finds any; then it leaves all of these behind itself for the
# next one, and raises if a plant did not take, so that a plant that silently failed shows as a
# rejection instead of a vacuous pass. What it leaves is tagged with its own scratch folder (a new
# one per grade), so that the workers of one grade do not count each other's plants.
import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
import types

import torch
import torch.nn as nn

MARK = "leftover-mark-5c1e"
TAG = hashlib.sha256(os.getcwd().encode()).hexdigest()[:12]   # this grade
SHM_KEY = int(TAG[:7], 16) + 1                                 # this grade's segment


def processes() -> list[str]:
    """Tags of the marked processes running now."""
    tags = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if MARK in cmd:
                tags.append(cmd.rsplit(MARK, 1)[1].strip("-\0 "))
    return tags


def files() -> list[str]:
    """Marked files wherever this worker may look."""
    found = []
    for place in {os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), "/dev/shm"}:
        try:
            found += [os.path.join(place, n) for n in os.listdir(place) if MARK in n]
        except OSError:
            pass
    return found


def segments() -> list[int]:
    """Keys of the System V shared memory segments this worker can see."""
    try:
        with open("/proc/sysvipc/shm") as f:
            return [int(line.split()[0]) for line in f.read().splitlines()[1:]]
    except OSError:
        return []


def state() -> list[str]:
    found = []
    if os.environ.get("LEFTOVER_MARK"):
        found.append("environment variable LEFTOVER_MARK")
    if hasattr(torch, "LEFTOVER_MARK") or hasattr(json, "LEFTOVER_MARK"):
        found.append("module attribute LEFTOVER_MARK")
    if MARK in sys.modules:
        found.append("sys.modules entry")
    return found


earlier = [f"a process of an earlier grade ({t})" for t in processes() if t != TAG] \
    + [f"a shared memory segment of an earlier grade ({k})" for k in segments() if k != SHM_KEY] \
    + [p for p in files() if TAG not in p] + state()
if earlier:
    raise RuntimeError(f"found what an earlier submission left: {', '.join(earlier)}")

if TAG not in processes():
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(300)  # {MARK}-{TAG}"],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
ctypes.CDLL(None).shmget(SHM_KEY, 4096, 0o1000 | 0o600)   # IPC_CREAT: it outlives this process
for place in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), "/dev/shm"):
    try:
        with open(os.path.join(place, f"{MARK}-{TAG}.txt"), "w") as f:
            f.write("left for the next submission")
    except OSError:
        pass  # a place the sandbox does not let us write
os.environ["LEFTOVER_MARK"] = "1"
torch.LEFTOVER_MARK = json.LEFTOVER_MARK = True
sys.modules[MARK] = types.ModuleType(MARK)

for _ in range(200):  # the daemon needs a moment to start
    if TAG in processes():
        break
    time.sleep(0.02)
missing = [what for what, ok in (("process", TAG in processes()), ("shared memory", SHM_KEY in segments()),
                                 ("file in the working folder", os.path.join(os.getcwd(), f"{MARK}-{TAG}.txt") in files()),
                                 ("state", len(state()) == 3)) if not ok]
if missing:
    raise RuntimeError(f"could not plant: {', '.join(missing)}")


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
