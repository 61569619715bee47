# isolation: plants, at import, what a later submission in the same warm sandbox could find:
# a daemon process in a new session, files in its folder, $HOME, TMPDIR and /dev/shm, an environment
# variable, and changed module state (torch, json, sys.modules). It checks that each plant is really
# in place (with the same checks as find_leftovers.py) and raises otherwise, so a plant that silently
# failed shows as a rejection instead of a vacuous pass.
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


if not daemon_alive():
    subprocess.Popen([sys.executable, "-c", f"import time; time.sleep(300)  # {MARK}"],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
for place in (os.getcwd(), os.path.expanduser("~"), tempfile.gettempdir(), "/dev/shm"):
    try:
        with open(os.path.join(place, f"{MARK}.txt"), "w") as f:
            f.write("left for the next submission")
    except OSError:
        pass  # a place the sandbox does not let us write
os.environ["LEFTOVER_MARK"] = "1"
torch.LEFTOVER_MARK = json.LEFTOVER_MARK = True
sys.modules[MARK] = types.ModuleType(MARK)

for _ in range(100):  # the daemon needs a moment to exec
    if daemon_alive():
        break
    import time
    time.sleep(0.02)
_missing = [name for name, ok in (("daemon", daemon_alive()), ("file in the working folder", any(
    os.path.dirname(p) == os.getcwd() for p in files_found())), ("state", len(state_found()) == 3)) if not ok]
if _missing:
    raise RuntimeError(f"could not plant: {', '.join(_missing)}")


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
