"""Exercises are plug-ins: one installed with pip is found and graded, and neither grader/ nor
sandbox/ knows about any exercise (no import of exercise/ from sandbox/, no exercise's words, no
import circle)."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests" / "plugins" / "tiny_exercise"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The tiny exercise package installed with pip into a folder of its own, and the environment
    that puts that folder on the path (a temporary environment: nothing else is installed)."""
    target, source = tmp_path_factory.mktemp("site"), tmp_path_factory.mktemp("source") / "tiny_exercise"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--no-index", "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=300)
    return {**os.environ, "PYTHONPATH": str(target)}


def _grade(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_an_installed_exercise_is_listed_and_graded(installed, tmp_path):
    listed = _grade(installed, "exercises")
    assert "tiny-double" in listed.stdout and "causal-self-attention" in listed.stdout, listed.stdout
    (tmp_path / "right.py").write_text("def double(x):\n    return x + x\n")
    (tmp_path / "wrong.py").write_text("def double(x):\n    return x + 1\n")
    (tmp_path / "missing.py").write_text("def triple(x):\n    return 3 * x\n")
    results = {}
    for name in ("right", "wrong", "missing"):
        run = _grade(installed, "--exercise", "tiny-double", str(tmp_path / f"{name}.py"), "--json", "-", "-q")
        assert run.returncode == 0, run.stderr
        results[name] = json.loads(run.stdout)
    assert (results["right"]["status"], results["right"]["score"]) == ("graded", 100.0)
    assert results["right"]["exercise"] == "tiny-double"
    assert (results["wrong"]["status"], results["wrong"]["score"]) == ("graded", 40.0)
    assert results["missing"]["status"] == "rejected"
    assert "defines no function double (functions found: triple)" in results["missing"]["feedback"]


def test_an_exercise_not_installed_is_unknown(tmp_path):
    (tmp_path / "right.py").write_text("def double(x):\n    return x + x\n")
    run = _grade({**os.environ, "PYTHONPATH": ""}, "--exercise", "tiny-double", str(tmp_path / "right.py"))
    assert run.returncode == 2 and "unknown exercise 'tiny-double'" in run.stderr


def _modules(package: str) -> dict[str, ast.Module]:
    return {f"{package}.{p.stem}": ast.parse(p.read_text()) for p in (ROOT / package).glob("*.py")}


def _imports(tree: ast.Module, top_level_only: bool) -> set[str]:
    """The modules a module imports (at its top level only, when asked: imports inside functions
    run later and cannot make a circle at import time)."""
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


@pytest.mark.unit
def test_the_sandbox_never_imports_an_exercise():
    for name, tree in _modules("sandbox").items():
        bad = sorted(m for m in _imports(tree, top_level_only=False) if m == "exercise" or m.startswith("exercise."))
        assert not bad, f"{name} imports {bad}"


@pytest.mark.unit
def test_no_word_of_any_exercise_in_the_grader_or_the_sandbox():
    words = re.compile(r"attention|multihead|sdpa|causal|CausalSelfAttention", re.IGNORECASE)
    for package in ("grader", "sandbox"):
        for path in sorted((ROOT / package).glob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                # the product's own name (attention-grader, its ATTENTION_GRADER_* variables) is no exercise's word
                cleaned = re.sub(r"attention[-_]grader", "", line, flags=re.IGNORECASE)
                assert not words.search(cleaned), f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


@pytest.mark.unit
def test_no_import_circle_among_the_sandbox_and_grader_modules():
    graph = {}
    for package in ("sandbox", "grader"):
        for name, tree in _modules(package).items():
            graph[name] = {m for m in _imports(tree, top_level_only=False) if m in _all_names()}
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import circle: " + " -> ".join([*path[path.index(nxt):], nxt]))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def _all_names() -> set[str]:
    return {f"{package}.{p.stem}" for package in ("sandbox", "grader") for p in (ROOT / package).glob("*.py")}


@pytest.mark.unit
def test_each_exercise_declares_exactly_the_groups_its_tests_are_marked_with():
    """Every test function of every exercise is declared in its groups (and carries @graded), and
    every declared group is a test: the host's view of the groups is the harness's."""
    import exercise as exercises
    for name, ex in exercises.all_exercises().items():
        declared = [g.name for g in ex.groups]
        found = []
        for path in sorted(ex.tests_dir.glob("test_*.py")):
            for node in ast.parse(path.read_text(encoding="utf-8")).body:
                if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                    assert any(isinstance(d, ast.Name) and d.id == "graded" for d in node.decorator_list), \
                        f"{name}: {node.name} has no @graded"
                    found.append(node.name)
        assert sorted(found) == sorted(declared), name
        assert round(sum(g.points for g in ex.groups), 9) == ex.max_score, name
