"""Measure how far correct solutions are from the float64 reference, and how close mistakes come.

    .venv/bin/python bench/measure_tolerances.py

Imports the project's own corpus (tests/submissions/correct and buggy) in this process, loads the
same weights into each module and into nn.MultiheadAttention, and compares every position, padded
ones included, over the shapes the suite uses. The tolerances in
exercise/causal_self_attention/checks.py were chosen from this output: they must sit far above the
worst correct error and far below the smallest error of a visible mistake.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from exercise.causal_self_attention import reference  # noqa: E402
from grader.submission import notebook_script  # noqa: E402

SHAPES = [(8, 1), (8, 2), (12, 3), (24, 4), (32, 8)]
CASES = [(T, B, lengths) for T in (1, 2, 7, 40) for B in (1, 3)
         for lengths in (None, [T] + [max(1, T - 3)] * (B - 1), [max(1, T // 2)] * B)]


def load(path: Path):
    source = notebook_script(path.read_bytes())[0] if path.suffix == ".ipynb" else path.read_bytes()
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(path.stem, loader=None))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # demo cells of notebooks print; the corpus warns on purpose
        exec(compile(source, str(path), "exec"), module.__dict__)
    return module.CausalSelfAttention


def worst_error(cls, dtype: torch.dtype) -> tuple[float, str]:
    worst, where = 0.0, ""
    for dim, heads in SHAPES:
        torch.manual_seed(0)
        module = cls(dim, heads).to(dtype).eval()
        weights = {k: v.to(dtype) for k, v in reference.random_weights(dim, seed=dim).items()}
        with torch.no_grad():
            for name, value in weights.items():
                module.get_parameter(name).copy_(value)
        for T, B, lengths in CASES:
            x = torch.randn(B, T, dim, dtype=torch.float64).to(dtype)
            mask = None if lengths is None else reference.right_padding(lengths[:B], T)
            with torch.no_grad():
                got = module(x) if mask is None else module(x, mask)
            expected = reference.attention({k: v.double() for k, v in weights.items()}, heads, x, mask)
            err = (got.double() - expected).abs().nan_to_num(nan=float("inf")).max().item()
            if err > worst:
                worst, where = err, f"dim={dim} h={heads} T={T} B={B} lengths={lengths}"
    return worst, where


def main() -> None:
    print("correct solutions: worst |got - expected| over every case")
    for dtype in (torch.float32, torch.float64):
        rows = []
        for path in sorted((ROOT / "tests/submissions/correct").iterdir()):
            rows.append((*worst_error(load(path), dtype), path.name))
        err, where, name = max(rows)
        print(f"  {str(dtype):14} worst {err:.2e}  ({name}, {where})")
    print("mistakes: smallest worst-case error among those the values show (float64, > 1e-9)")
    smallest = []
    for path in sorted((ROOT / "tests/submissions/buggy").glob("*.py")):
        try:
            err, _ = worst_error(load(path), torch.float64)
        except Exception as exc:  # a mistake that raises is visible by its exception
            err = float("inf") if not isinstance(exc, AttributeError) else float("nan")
        if 1e-9 < err < float("inf"):
            smallest.append((err, path.name))
    for err, name in sorted(smallest)[:5]:
        print(f"  {err:.2e}  {name}")


if __name__ == "__main__":
    main()
