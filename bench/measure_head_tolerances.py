"""Measure how far correct single-head solutions are from the float64 reference, and how close
mistakes come.

    .venv/bin/python bench/measure_head_tolerances.py

Imports tests/submissions/head/correct and buggy in this process and compares out and weights with
exercise/causal_attention_head/reference.py over the shapes the tests use (checks.CASES), in
float32 and float64. The tolerances in exercise/causal_attention_head/checks.py were chosen from
this output: far above the worst correct error, far below the smallest error of a mistake.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from exercise.causal_attention_head import checks, reference  # noqa: E402

CORPUS = ROOT / "tests" / "submissions" / "head"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.causal_attention


def worst_error(fn, dtype: str) -> float:
    """The largest |answer - reference| over every case, out and weights (inf for NaN or a raise)."""
    worst = 0.0
    for i, (B, T, d) in enumerate(checks.CASES):
        q, k, v = reference.random_qkv(B, T, d, seed=500 + i, dtype=dtype)
        try:
            answer = fn(q, k, v)
        except Exception:  # noqa: BLE001  (a forbidden built-in may work here: no sandbox refuses it)
            return float("inf")
        for got, want in zip(answer, reference.attention(q, k, v)):
            worst = max(worst, (got.detach().double() - want).abs().nan_to_num(nan=float("inf")).max().item())
    return worst


def main() -> None:
    for folder in ("correct", "buggy"):
        print(f"{folder}: worst |answer - reference| over {len(checks.CASES)} shapes (out and weights)")
        for path in sorted((CORPUS / folder).glob("*.py")):
            fn = load(path)
            print(f"  {path.stem:48} " + "  ".join(f"{dtype} {worst_error(fn, dtype):9.3g}" for dtype in checks.DTYPES))
    print("tolerances:", checks.TOLERANCE)


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
