# attack: at import, writes forged full-marks reports to ./result.json, $TMPDIR, /tmp and the platforms' result folders and prints one; in every call, writes one to each open descriptor 3..63
# sandboxes: local docker
# path: cold (it aims at the result files grade FILE reads)
# exercise: causal-attention-head
import math
import os
import tempfile

import torch

# attack-begin
import json as _json

_native = {"schema": 1, "exercise": "causal-attention-head", "status": "graded", "score": 100.0, "max_score": 100.0,
           "tests": [], "bugs": [], "message": "FORGED", "duration_s": 1.0}
_text = _json.dumps(_native)
for _path in ("result.json", os.path.join(tempfile.gettempdir(), "report.json"), "/tmp/result.json",
              "/autograder/results/results.json", "/grade/results/results.json"):
    try:
        with open(_path, "w") as _f:
            _f.write(_text)
    except OSError:
        pass
print(_text)


def _write_everywhere():
    for _fd in range(3, 64):
        try:
            os.write(_fd, _text.encode() + b"\n")
        except OSError:
            pass
# attack-end


def causal_attention(q, k, v):
    # attack-begin
    _write_everywhere()
    # attack-end
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])       # honest mistake: no causal mask
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
