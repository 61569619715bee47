"""Behavioural diagnosis: which known mistake explains what this submission does.

It works on behaviour, never on the code's text (except to point at a line):
- outputs under the grader's weights, compared with the reference carrying each known mistake as a
  switch (`mistakes.py`), single mistakes first, then pairs;
- exceptions, recognised from their type and message;
- properties with their own probes: the parameter count across n_heads, randomness in eval and in
  training mode, gradients, a run on the meta device (a mask made on the CPU shows there without a
  GPU), the SDPA math backend, and calls to the attention built-ins the exercise forbids.
Where nothing matches, it says where the output is wrong and that no known mistake explains it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from exercise.causal_self_attention import mistakes, reference, scan
from exercise.causal_self_attention.catalog import CATALOG
from exercise.causal_self_attention.checks import (DTYPES, LONG_T, TOLERANCE, Tolerance, finite_difference_jvps,
                                                   gradient_agrees, random_input)
from sandbox import kit
from sandbox.failures import StudentCodeError, WorkerFailure

DIM, HEADS = 24, 4          # head_dim 6 != sqrt(24): scale mistakes stay apart; 4 heads show head bugs
# A model matches the student's output to these bounds, and an output is wrong for the diagnosis
# beyond them: three orders of magnitude above float rounding (scores shifted by -1e9 keep only about
# 1e-7 of their digits in float64), and still three below the smallest difference between two
# mistakes (about 1e-2). What the tests call wrong is stricter (checks.TOLERANCE).
MATCH: dict[str, Tolerance] = {"float64": {"atol": 1e-6, "rtol": 1e-5}, "float32": {"atol": 1e-4, "rtol": 1e-3}}
LINEAR = "torch.nn.modules.linear.Linear"


@dataclass(frozen=True)
class Finding:
    """One diagnosed mistake with the evidence from this submission."""
    id: str
    variant: str | None
    evidence: str

    def to_report(self) -> dict:
        return CATALOG[self.id].finding(self.id, self.variant, self.evidence)


@dataclass
class Diagnosis:
    findings: list[Finding] = field(default_factory=list)
    unexplained: str | None = None   # the output is wrong and no known mistake matches
    skipped: list[str] = field(default_factory=list)  # probes that could not use the output

    def ids(self) -> set[str]:
        return {f.id for f in self.findings}

    def add(self, bug_id: str, variant: str | None, evidence: str) -> None:
        if bug_id not in self.ids():
            self.findings.append(Finding(bug_id, variant, evidence))


@dataclass(frozen=True)
class Probe:
    """One input the outputs are compared on, at one shape."""
    x: torch.Tensor
    mask: torch.Tensor | None
    label: str
    dim: int = DIM
    heads: int = HEADS
    dtype: str = "float64"

    @property
    def args(self) -> tuple:
        return (self.x,) if self.mask is None else (self.x, self.mask)

    @property
    def long(self) -> bool:
        return self.x.shape[1] > 16

    def describe(self) -> str:
        B, T, _ = self.x.shape
        return f"dim={self.dim}, n_heads={self.heads}, B={B}, T={T}, {self.dtype}, {self.label}"


# The shapes the diagnosis probes: the tests' matrix (one head, head_dim 1, 3 and 8 heads), so a
# mistake that shows only at some shapes is seen where it shows. DIM x HEADS comes first: it tells
# the most mistakes apart.
PROBE_SHAPES = [(DIM, HEADS), (8, 1), (12, 3), (32, 8), (8, 8)]


def probes(dim: int = DIM, heads: int = HEADS, dtype: str = "float64") -> list[Probe]:
    """Short and long sequences, one sequence and three, no mask, an all-True mask, and padding
    masks with the full sequence first, in the middle and last (a mask taken from one sequence, or
    skipped when one is full, differs from an ignored one at some order); a call without a mask
    after a padded one of the same shape (a layer that kept the last mask answers with it)."""
    x2 = random_input(2, 6, dim, seed=901, dtype=dtype)
    x3 = random_input(3, 9, dim, seed=902, dtype=dtype)
    x1 = random_input(1, 9, dim, seed=903, dtype=dtype)
    long1, long3 = random_input(1, LONG_T, dim, seed=911, dtype=dtype), random_input(3, 40, dim, seed=912, dtype=dtype)
    made = [(x2, None, "no mask"), (x3, None, "no mask"),
            (x3, reference.right_padding([3, 9, 1], 9), "padding, real lengths [3, 9, 1]"),
            (x3, torch.ones(3, 9, dtype=torch.bool), "an all-True mask"), (x1, None, "no mask"),
            (x1, reference.right_padding([5], 9), "padding, real length [5]"),
            (x3, reference.right_padding([4, 1, 9], 9), "padding, real lengths [4, 1, 9]"),
            (x3, None, "no mask, right after a padded call"),   # a layer that kept the last mask uses it
            (long1, None, "no mask"), (long3, reference.right_padding([40, 23, 5], 40), "padding, real lengths [40, 23, 5]")]
    return [Probe(x, mask, label, dim, heads, dtype) for x, mask, label in made]


def diagnose(student, source_lines: list[str], locate) -> Diagnosis:
    """What can be told before the tests run: the layers, and calls to the forbidden built-ins
    (the comparison tests need that answer). Never raises for what the student's code does."""
    found = Diagnosis()
    _run(found, (_structure, _forbidden), student, source_lines, locate)
    return found


def complete(found: Diagnosis, student, source_lines: list[str], locate, *, failed: bool) -> None:
    """The rest, after the tests: the probes that name what went wrong run only when a test failed,
    so a correct submission pays for none of them; it still gets the check whose finding is advice
    (a kernel other hardware would use)."""
    _run(found, (_outputs, _autograd, _training_mode) if failed else (_sdpa_math,), student, source_lines, locate)


def _run(found: Diagnosis, steps, student, source_lines, locate) -> None:
    for step in steps:
        try:
            step(student, found, source_lines, locate)
        except (StudentCodeError, WorkerFailure):
            continue  # the step's own evidence is missing; the tests report the failure itself
        except (RuntimeError, TypeError, ValueError, IndexError, ArithmeticError, MemoryError, RecursionError) as err:
            # An output of an odd shape or dtype that a probe could not digest: the tests grade it;
            # the diagnosis must never turn a student's mistake into a grader fault.
            found.skipped.append(f"{step.__name__.strip('_')}: {type(err).__name__}: {err}")
    if "params_depend_on_heads" in found.ids():  # per-head layers explain the wrong layout too
        found.findings = [f for f in found.findings if f.id != "wrong_layers"]


# -- structure ---------------------------------------------------------------------------------------
def _structure(student, found: Diagnosis, *_):
    counts = {h: student.new(DIM, h).n_params for h in (1, 2, 3, 4, 6, 8)}
    expected = 4 * DIM * DIM + 4 * DIM
    listed = ", ".join(f"n_heads={h}: {n}" for h, n in counts.items())
    if len(set(counts.values())) > 1:
        found.add("params_depend_on_heads", None,
                  f"at dim={DIM} your module has {listed} parameters; expected {expected} for every n_heads")
    module = student.new(DIM, HEADS)
    problems = []
    for name, weight, bias in (("qkv", (3 * DIM, DIM), (3 * DIM,)), ("proj", (DIM, DIM), (DIM,))):
        if name not in module.children or LINEAR not in module.children[name]:
            problems.append(f"no nn.Linear self.{name}")
        elif module.params.get(f"{name}.weight") != weight:
            problems.append(f"self.{name}.weight has shape {module.params.get(name + '.weight')}, expected {weight}")
        elif module.params.get(f"{name}.bias") != bias:
            problems.append(f"self.{name} has no bias")
    if problems:
        variant = "no_bias" if all(p.endswith("no bias") for p in problems) else "layout"
        layers = ", ".join(f"{k} {tuple(v)}" for k, v in list(module.params.items())[:6])
        found.add("wrong_layers", variant, "; ".join(problems) + f" (your parameters: {layers})")


# -- outputs -----------------------------------------------------------------------------------------
@dataclass
class Observed:
    """The student's output on one probe, beside the correct one; `right_up_to`: the longest
    sequence the module's output is right for at this shape and dtype, where it is right on the
    short probes and wrong on a long one (a mask made for a fixed length, mistakes.BUFFERS)."""
    probe: Probe
    weights: dict
    out: torch.Tensor
    correct: torch.Tensor
    right_up_to: int | None = None

    @property
    def wrong(self) -> bool:
        return not _same(self.out, self.correct, self.probe.dtype)

    @property
    def wrong_for_the_tests(self) -> bool:
        return not _same(self.out, self.correct, self.probe.dtype, bounds=TOLERANCE)


def _outputs(student, found: Diagnosis, source_lines, locate):
    observed, raised = [], []
    for n, (dim, heads) in enumerate(PROBE_SHAPES):
        for dtype in ("float64", "float32") if n < 2 else ("float64",):
            try:
                observed += _observe(student, found, dim, heads, dtype)
            except StudentCodeError as err:
                if n == 0 and dtype == "float64":
                    _exception(student, found, err, dim, heads, dtype)
                    return
                raised.append(f"with dim={dim}, n_heads={heads}, {dtype} your forward raised {err.describe()}")
    if "nondeterministic_dropout" in found.ids():
        return
    wrong = sorted((o for o in observed if o.wrong), key=lambda o: o.out.numel())
    if not wrong:
        slightly = [o for o in observed if o.wrong_for_the_tests]   # right but for rounding: no mistake
        small = None if raised or not slightly else _explain_small(slightly)
        if small is not None:  # a mask that leaks a weight of e^-20 or so: wrong for the tests alone
            combo, values = small
            for bug_id, variant in combo:
                found.add(bug_id, variant, _match_evidence(combo, values, slightly, observed, small=True))
        elif raised or slightly:
            found.unexplained = _where_wrong(slightly, raised)
        else:
            _sdpa_math(student, found)
        return
    kept = _right_on_a_module_of_its_own(student, wrong)
    if kept:  # no model of one call explains it: the module's answer depends on its earlier calls
        found.add("state_between_calls", None, kept)
        return
    match = _explain(wrong)
    if match == []:
        order = _heads_in_another_order(wrong)
        if order:
            found.add("wrong_head_merge", "heads_permuted", order)
            return
    if isinstance(match, list):
        found.unexplained = _where_wrong(wrong, raised, candidates=match)
        return
    combo, values = match
    for bug_id, variant in combo:
        found.add(bug_id, _named_variant(bug_id, variant, values),
                  _match_evidence(combo, values, wrong, observed))


def _heads_in_another_order(wrong: list[Observed]) -> str | None:
    """Evidence that every wrong output is the correct heads joined in another order (any
    permutation of the heads, one per shape: reversed, rolled, swapped), fitted from the output:
    undone through the grader's proj, each head_dim block of it is one correct head, by equality.
    None when some probe's blocks are not the heads, or are in order."""
    orders: dict[tuple[int, int], list[int]] = {}
    for o in wrong:
        p, H = o.probe, o.probe.heads
        if H < 2 or tuple(o.out.shape) != tuple(p.x.shape):
            return None
        B, T, C = p.x.shape
        heads = _model(o, (("missing_output_projection", "missing"),)).reshape(B, T, H, C // H)
        P, bias = o.weights["proj.weight"].double(), o.weights["proj.bias"].double()
        joined = torch.linalg.solve(P, (o.out.double() - bias).reshape(-1, C).T).T.reshape(B, T, H, C // H)
        tolerance = {"atol": 1e-6, "rtol": 1e-5} if p.dtype == "float64" else {"atol": 1e-3, "rtol": 1e-2}
        order = []
        for j in range(H):
            same = [h for h in range(H) if bool(torch.isclose(joined[:, :, j], heads[:, :, h], equal_nan=True,
                                                                **tolerance).all())]
            if len(same) != 1:
                return None
            order.append(same[0])
        if sorted(order) != list(range(H)) or order == list(range(H)) or orders.setdefault((p.dim, H), order) != order:
            return None
    shown = "; ".join(f"at dim={d}, n_heads={h}: heads {order}" for (d, h), order in sorted(orders.items()))
    return (f"undone through proj, your output is the correct heads joined in another order on every probe where "
            f"it is wrong ({shown}, where 0..n_heads-1 in order is expected): concatenate the heads in order, "
            f"head 0 first")


def _right_on_a_module_of_its_own(student, wrong: list[Observed]) -> str | None:
    """Evidence that a wrong output comes from what the module kept of an earlier call: the same
    call, the first on a new module with the same weights, is right."""
    for o in wrong[:4]:
        p = o.probe
        try:
            (alone,) = student.new(p.dim, p.heads, dtype=p.dtype, params=_probe_params(p.dim, p.heads, p.dtype)).map([p.args])
        except (StudentCodeError, WorkerFailure):
            continue
        if _same(alone, o.correct, p.dtype) and not _same(alone, o.out, p.dtype):
            return (f"with dim={p.dim}, n_heads={p.heads}, {p.dtype}, T={p.x.shape[1]}, {p.label}: your module's output "
                    f"is off by up to {_gap(o.out, o.correct):.3g} when the call comes after others, and right when "
                    f"it is the first call of a new module with the same weights")
    return None


def _longest_that_runs(module, dim: int, dtype: str, runs: int, breaks: int,
                       raised: StudentCodeError) -> tuple[int, int, StudentCodeError]:
    """(the longest T that runs, the shortest that raises, what it raises), by bisection between a
    length that runs and one that raised `raised`: where a fixed buffer ends."""
    while breaks - runs > 1:
        middle = (runs + breaks) // 2
        err = breaks_with(module, dim, dtype, middle)
        if err is None:
            runs = middle
        else:
            breaks, raised = middle, err
    return runs, breaks, raised


def breaks_with(module, dim: int, dtype: str, T: int) -> StudentCodeError | None:
    """What a forward of one sequence of length T raises, or None."""
    try:
        module(random_input(1, T, dim, seed=913 + T, dtype=dtype))
    except StudentCodeError as err:
        return err
    return None


def _probe_params(dim: int, heads: int, dtype: str) -> dict:
    """The grader's weights for the probes of one shape, in dtype: what the student's module is loaded with."""
    return {k: v.to(DTYPES[dtype]) for k, v in reference.random_weights(dim, seed=777 + dim + heads).items()}


def _observe(student, found: Diagnosis, dim: int, heads: int, dtype: str) -> list[Observed]:
    """The outputs of a module with the grader's weights on the probes of one shape. Long sequences
    run on their own: a module built for a fixed maximum length still shows its short outputs."""
    params = _probe_params(dim, heads, dtype)
    weights = {k: v.double() for k, v in params.items()}  # the same values, for the reference's arithmetic
    module = student.new(dim, heads, dtype=dtype, params=params)
    cases = probes(dim, heads, dtype)
    short = [p for p in cases if not p.long]
    if (dim, heads, dtype) == (DIM, HEADS, "float64"):
        # The same call twice, first thing: a module whose mask cache changes with what it has seen
        # gives the same answer to the same call twice in a row; dropout does not.
        first, again = module.map([short[0].args, short[0].args])
        if not _same(first, again, dtype):
            found.add("nondeterministic_dropout", "active_in_eval",
                      f"two calls in eval mode with the same input differ by up to "
                      f"{(first.double() - again.double()).abs().nan_to_num(nan=0).max().item():.3g}")
            return []
    outs = module.map([p.args for p in short])
    long = [p for p in cases if p.long]
    try:
        outs += module.map([p.args for p in long])
        short += long
    except StudentCodeError as err:
        runs, breaks, raised = _longest_that_runs(module, dim, dtype, 9, max(p.x.shape[1] for p in long), err)
        found.add("fixed_max_length", None,
                  f"sequences up to length {runs} run, but length {breaks} raises {raised.describe()}")
    observed = [Observed(p, weights, out, reference.attention(weights, heads, p.x, p.mask))
                for p, out in zip(short, outs)]
    right = [o.probe.x.shape[1] for o in observed if not o.wrong]
    wrong = [o.probe.x.shape[1] for o in observed if o.wrong]
    # Right at some length of 2 or more, wrong at every longer one: a mask made for a fixed length.
    # (Right at T = 1 alone says nothing: one position has nothing to mask, and a "mask made for 1
    # position" opened, clamped or taken modulo 1 is no mask at all, which no_causal_mask names.)
    if wrong and max(right, default=0) >= 2 and min(wrong) > max(right):
        up_to = _longest_right(module, weights, heads, dtype, max(right, default=1), min(wrong))
        for o in observed:
            o.right_up_to = up_to
    return observed


def _longest_right(module, weights: dict, heads: int, dtype: str, right: int, wrong: int) -> int:
    """The longest T at which the module's output is right, by bisection between a length where it
    is right and a longer one where it is wrong: where a mask made for a fixed length ends."""
    while wrong - right > 1:
        middle = (right + wrong) // 2
        x = random_input(1, middle, dim=weights["proj.bias"].shape[0], seed=931 + middle, dtype=dtype)
        try:
            ok = _same(module(x), reference.attention(weights, heads, x, None), dtype)
        except StudentCodeError:
            ok = False
        right, wrong = (middle, wrong) if ok else (right, middle)
    return right


def _explain(wrong: list[Observed]):
    """The mistake, or pair of mistakes, whose model reproduces the output on every probe where the
    output is wrong: (combo, fitted values per shape); a list of the candidates when nothing, or
    more than one mistake, does (a name is given only when it is the only one that fits). A probe
    where the output is right is no evidence against a mistake that shows only at some shapes (a
    fast path for one head, a mask cache that ends at T = 8); the evidence says where it shows.
    Whole probes are compared first; only when no model reproduces them whole, the wrong positions
    alone (where a model that is wrong elsewhere on the same probe could fit by chance)."""
    for rows in (False, True):
        found: list[tuple[tuple[mistakes.Mistake, ...], dict]] = [((m,), {}) for m in mistakes.SINGLES if all(_matches(o, (m,), rows=rows) for o in wrong)]
        for mistake, grid in mistakes.FITTED + [(m, ()) for m in mistakes.BUFFERS]:
            values = _fitted_on_all(wrong, mistake, grid, lambda o, m, value, rows=rows: _matches(o, (m,), value, rows=rows))
            if values is not None:
                found.append(((mistake,), values))
        if not found:
            found = [(combo, {}) for combo in mistakes.PAIRS if all(_matches(o, combo, rows=rows) for o in wrong)]
        names = {frozenset(bug_id for bug_id, _ in combo) for combo, _ in found}
        if len(names) == 1:
            return found[0]
        if found:
            return [combo for combo, _ in found]
    return []


# The fills whose effect can be below MATCH and above the tests' tolerance: a blocked key kept at a
# weight of e^c (log(mask.clamp(1e-9)) adds -20.7, a fill of -25 keeps e^-25 of a key).
SMALL_LEAKS = [(m, grid) for m, grid in mistakes.FITTED if m[0] == "mask_fill_not_neg_inf"]
EXPLAINS = 1e-2   # a model explains a small difference when it is right to this share of it


def _explain_small(slightly: list[Observed]):
    """The fill, fitted per probe shape, that accounts for every output the tests found wrong when
    MATCH finds it right: the model's own difference from the output at most EXPLAINS of the
    output's difference from the reference, everywhere. (combo, fitted values), or None when none
    does, or when mistakes of more than one kind do (as _explain names one only when it alone fits)."""
    def explains(o: Observed, mistake, value: float) -> bool:
        model = _model(o, (mistake,), torch.tensor(value, dtype=torch.float64))
        return _gap(model, o.out.double()) <= EXPLAINS * _gap(o.out, o.correct.double())
    found = []
    ordered = sorted(slightly, key=lambda o: o.out.numel())
    for mistake, grid in SMALL_LEAKS:
        values = _fitted_on_all(ordered, mistake, grid, explains)
        if values is not None:
            found.append(((mistake,), values))
    return found[0] if len({frozenset(bug_id for bug_id, _ in combo) for combo, _ in found}) == 1 else None


def _fitted_on_all(observed: list[Observed], mistake, grid, holds) -> dict | None:
    """The mistake's free value fitted once per _key (on the first observation of that key), when
    `holds(o, mistake, value)` on every observation in turn; None at the first that has no value or
    where it does not hold."""
    values: dict = {}
    for o in observed:
        key = _key(o, mistake)
        if key not in values:
            values[key] = _fit(o, mistake, grid)
        if values[key] is None or not holds(o, mistake, values[key]):
            return None
    return values


def _key(o: Observed, mistake) -> tuple:
    """Where a fitted value holds: one shape (dim, n_heads); a number added to the scores is fitted
    per dtype too (Hugging Face's finfo(dtype).min, or a -1e9 that wipes out float32 scores only)."""
    shape = (o.probe.dim, o.probe.heads)
    added = mistake in mistakes.ADDITIVE or mistake[1] in mistakes.ADDITIVE
    return shape + (o.probe.dtype,) if added and o.probe.dtype != "float64" else shape


def _model(o: Observed, combo, value=None, zero: bool = False) -> torch.Tensor:
    return mistakes.attention(o.weights, o.probe.heads, o.probe.x, o.probe.mask, combo,
                              empty_rows_zero=zero, value=value, dtype=o.probe.dtype)


def _matches(o: Observed, combo, value=None, rows: bool = False) -> bool:
    """Equal to the reference with these mistakes on this probe; with `rows`, only at the positions
    where the output is wrong (an output position is one row of attention: a last block of queries
    handled apart is wrong only at some positions). A row with no key left may be NaN
    (masked_fill) or zero attention (SDPA), as either correct style gives."""
    if tuple(o.out.shape) != tuple(o.probe.x.shape):
        return False
    right = _rows_equal(o.out, o.correct, o.probe.dtype) if rows else False        # (B, T)
    return any(bool((_rows_equal(o.out, _model(o, combo, value, zero), o.probe.dtype) | right).all())
               for zero in (False, True))


def _rows_equal(a: torch.Tensor, b: torch.Tensor, dtype: str) -> torch.Tensor:
    """(B, T): where two (B, T, dim) outputs agree at every feature."""
    return torch.isclose(a.double(), b.double(), equal_nan=True, **MATCH[dtype]).all(dim=2)


def _fit(o: Observed, mistake, grid) -> float | None:
    """The value of a mistake's free parameter that best reproduces the output on one probe: the
    best point of a grid, then Gauss-Newton steps to full precision. A mask's length is measured,
    not fitted (Observed.right_up_to)."""
    if mistake in mistakes.BUFFERS:
        return None if o.right_up_to is None else float(o.right_up_to)
    target = o.out.double()
    usable = torch.isfinite(target)

    def gap(value) -> float:
        got = _model(o, (mistake,), torch.tensor(value, dtype=torch.float64))
        return float(torch.where(usable, got - target, torch.zeros(())).nan_to_num(nan=1e30).abs().max())

    def residual(value) -> float:
        got = _model(o, (mistake,), torch.tensor(value, dtype=torch.float64))
        return float(torch.where(usable, target - got, torch.zeros(())).nan_to_num().square().sum())

    value = start = min(grid, key=gap)
    previous = math.inf
    for _ in range(20):
        h = 1e-6 * max(abs(value), 1e-3)
        plus, minus, here = (_model(o, (mistake,), torch.tensor(v, dtype=torch.float64))
                             for v in (value + h, value - h, value))
        slope = torch.where(usable, (plus - minus) / (2 * h), torch.zeros(())).nan_to_num()
        resid = torch.where(usable, target - here, torch.zeros(())).nan_to_num()
        norm = float((slope * slope).sum())
        now = float((resid * resid).sum())
        # No step left to take, or one that no longer lowers the residual by a billionth: a model
        # that fits converges to a residual of rounding, one that does not stalls above it (checked
        # by _matches either way); the steps that follow a stall would change nothing it decides.
        if norm == 0 or now >= previous * (1 - 1e-9):
            break
        previous = now
        step = float((slope * resid).sum()) / norm
        for _halving in range(12):  # a step that overshoots (the softmax is far from linear) is halved
            if math.isfinite(value + step) and residual(value + step) <= now:
                break
            step /= 2
        value += step
        if abs(step) <= 1e-13 * max(abs(value), 1e-12):
            break
    if not (math.isfinite(value) and gap(value) <= gap(start)):
        value = start  # a flat fit (a constant that wipes out the scores) is not improved by steps
    if mistake == ("wrong_scale", "factor") and not abs(value) > 1e-6:
        return None  # scores multiplied by 0 are not used at all: that is not a scale
    if mistake in mistakes.NEGATIVE and not value < -1e-6:
        return None  # a mask added with the other sign is the other mistake (mistakes.ADDITIVE)
    return value if math.isfinite(value) else None


SCALES = {  # the factor a score is scaled by -> what the code most likely does
    "sqrt_dim": lambda dim, hd, h: 1 / math.sqrt(dim), "none": lambda dim, hd, h: 1.0,
    "multiplied": lambda dim, hd, h: math.sqrt(hd), "head_dim_not_sqrt": lambda dim, hd, h: 1 / hd,
    "twice_head_dim": lambda dim, hd, h: 1 / (2 * hd), "half_head_dim": lambda dim, hd, h: hd / 2,
    "sqrt_n_heads": lambda dim, hd, h: 1 / math.sqrt(h),
}


def _named_variant(bug_id: str, variant: str | None, values: dict) -> str | None:
    """A fitted scale gets the name of the formula it equals at every probed shape, if any."""
    if (bug_id, variant) != ("wrong_scale", "factor"):
        return variant
    for name, formula in SCALES.items():
        if all(math.isclose(v, formula(d, d // h, h), rel_tol=1e-6) for (d, h, *_), v in values.items()):
            return name
    return "constant"


def _match_evidence(combo, values: dict, wrong: list[Observed], observed: list[Observed], small: bool = False) -> str:
    """`small`: the outputs are off by less than MATCH sees (_explain_small), and the model accounts
    for that difference to EXPLAINS of it."""
    names = " and ".join(f"{i} ({v})" for i, v in combo)
    fitted = ""
    if values:
        what = ("the scores are multiplied by" if combo[0][0] == "wrong_scale" else
                 "the scores get added" if combo[0] in mistakes.ADDITIVE or combo[0][1] in mistakes.ADDITIVE
                 else "masked scores are set to")
        if len({round(v, 9) for v in values.values()}) == 1:
            shown = f"{next(iter(values.values())):.6g}" + (
                " at every shape (expected 1/sqrt(head_dim): " + ", ".join(
                    f"{1 / math.sqrt(d // h):.6g} at dim={d}, n_heads={h}" for d, h, *_ in values) + ")"
                if combo[0][0] == "wrong_scale" else "")
        else:
            shown = "; ".join(f"{v:.6g} at dim={d}, n_heads={h}" + "".join(f", {t}" for t in dtype) + (
                f" (expected 1/sqrt(head_dim) = {1 / math.sqrt(d // h):.6g})" if combo[0][0] == "wrong_scale" else "")
                for (d, h, *dtype), v in values.items())
        fitted = f"; fitted to your output, {what} {shown}"
        if combo[0] in mistakes.BUFFERS:
            lengths = sorted({int(v) for v in values.values()})
            fitted = (f"; measured on your layer, its output is right for sequences up to length "
                      f"{' or '.join(map(str, lengths))} and wrong from {lengths[0] + 1} on")
    # Show the probe where the output is furthest from the correct layer's.
    worst = max(wrong, key=lambda o: _gap(o.out, o.correct))
    b, t = _worst(worst.out, worst.correct)
    where = _where_it_shows(wrong, observed, combo, values)
    if small:
        off = (worst.out[b, t, :3].double() - worst.correct[b, t, :3].double()).tolist()
        return (f"your output is off the correct layer's by up to {_gap(worst.out, worst.correct):.3g}, too "
                f"little to see in its first digits and more than the tests allow, and the reference with {names} "
                f"accounts for that difference to {EXPLAINS:.0%} of it on every probe where it shows{fitted}{where}; "
                f"e.g. with {worst.probe.describe()}, out[{b}, {t}, :3] is off by "
                f"[{', '.join(f'{d:.3g}' for d in off)}]")
    return (f"your output equals the reference with {names} on every probe where it is wrong, to "
            f"{'1e-6' if all(o.probe.dtype == 'float64' for o in wrong) else '1e-4'}{fitted}{where}; "
            f"e.g. with {worst.probe.describe()}, out[{b}, {t}, :3] = {_fmt(worst.out[b, t, :3].tolist())} "
            f"where the correct layer gives {_fmt(worst.correct[b, t, :3].tolist())}")


def _where_it_shows(wrong: list[Observed], observed: list[Observed], combo, values: dict) -> str:
    """'' when the mistake shows on every probe where its model differs from the correct layer;
    else which shapes it is limited to (n_heads, B, T). A mistake with a free parameter is modelled
    only at the shapes it was fitted at (where the output is wrong): elsewhere it has no value, and
    the output there being right says nothing against it."""
    fitted = any(m == mistake for m in combo for mistake, _grid in mistakes.FITTED) or combo[0] in mistakes.BUFFERS
    shapes = {key[:2] for key in values}
    right = sorted({(o.probe.dim, o.probe.heads) for o in observed} - shapes) if fitted else []
    if right:
        shows = ", ".join(f"({d}, {h})" for d, h in sorted(shapes))
        fine = ", ".join(f"({d}, {h})" for d, h in right)
        return f" (it shows only at (dim, n_heads) = {shows}: at {fine} your output is right)"

    def fitted_at(o):  # a value fitted per dtype, else the shape's (a dtype where the output is right)
        return values.get(_key(o, combo[0]), values.get((o.probe.dim, o.probe.heads)))

    changed = {id(o): ~_rows_equal(_model(o, combo, fitted_at(o)), o.correct,
                                   o.probe.dtype) for o in observed}   # (B, T): where the model differs
    differs = [o for o in observed if changed[id(o)].any()]
    rows = [(~_rows_equal(o.out, o.correct, o.probe.dtype), changed[id(o)]) for o in wrong]
    positions = ""
    if any(bool((c & ~w).any()) for w, c in rows):  # right at some positions the model would change
        at = sorted({t for w, _ in rows for t in w.nonzero()[:, 1].tolist()})
        positions = f", at positions {kit.ranges(at)}"
    if len(differs) <= len(wrong) and not positions:
        return ""
    attrs = (("n_heads", lambda o: o.probe.heads), ("T", lambda o: o.probe.x.shape[1]),
             ("B", lambda o: o.probe.x.shape[0]), ("dtype", lambda o: o.probe.dtype))
    wrong_ids = {id(o) for o in wrong}
    limits = []
    for name, attr in attrs:
        seen = {attr(o) for o in wrong}
        if seen == {attr(o) for o in differs}:
            continue
        shown = f"{name} in {sorted(seen)}" if len(seen) > 1 else f"{name} = {next(iter(seen))}"
        if {id(o) for o in differs if attr(o) in seen} == wrong_ids:
            limits = [shown]  # this one alone says where it shows
            break
        limits.append(shown)
    shown = ", ".join(limits) or f"{len(wrong)} of the {len(differs)} probes it would change"
    return f" (it shows only where {shown}{positions}: elsewhere your output is right)"


def _same(a: torch.Tensor, b: torch.Tensor, dtype: str = "float64", bounds: dict = MATCH) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(
        torch.isclose(a.double(), b.double(), equal_nan=True, **bounds[dtype]).all())


def _gap(got: torch.Tensor, want: torch.Tensor) -> float:
    if tuple(got.shape) != tuple(want.shape):
        return float("inf")
    return (got.double() - want).abs().nan_to_num(nan=float("inf")).max().item()


def _worst(got: torch.Tensor, want: torch.Tensor) -> tuple[int, int]:
    err = (got.double() - want).abs().nan_to_num(nan=float("inf")).amax(dim=2)    # (B, T)
    b, t = divmod(int(err.argmax()), err.shape[1])
    return b, t


def _fmt(values) -> str:
    return "[" + ", ".join(f"{v:.4f}" for v in values) + "]"


def _where_wrong(wrong: list[Observed], raised: list[str], candidates=()) -> str:
    parts = []
    for o in wrong[:6]:
        if tuple(o.out.shape) != tuple(o.correct.shape):
            parts.append(f"with {o.probe.describe()}: output shape {tuple(o.out.shape)}, "
                         f"expected {tuple(o.correct.shape)}")
            continue
        bad = ~torch.isclose(o.out.double(), o.correct, **TOLERANCE[o.probe.dtype]).all(dim=2)    # (B, T)
        positions = sorted(set(bad.nonzero()[:, 1].tolist()))
        parts.append(f"with {o.probe.describe()}: positions {kit.ranges(positions)} differ "
                     f"(largest difference {_gap(o.out, o.correct):.3g})")
    if len(wrong) > 6:
        parts.append(f"and {len(wrong) - 6} more probes")
    if candidates:
        names = sorted({" and ".join(f"{i} ({v})" for i, v in combo) for combo in candidates})
        return ("the output is wrong and no single mistake in the catalog can be named: "
                f"{' or '.join(names[:4])} reproduce it on every probe alike, so the probes cannot tell "
                "which; " + "; ".join(parts + raised))
    return ("the output is wrong and no mistake in the catalog (single or pair) reproduces it: "
            + "; ".join(parts + raised) + _precision(wrong))


def _precision(wrong: list[Observed]) -> str:
    """A precision finding: a float64 output that is close to the correct one everywhere it is
    wrong, as arithmetic in a lower dtype makes it."""
    rel = max((_gap(o.out, o.correct) / max(o.correct.abs().max().item(), 1e-12) for o in wrong
               if o.probe.dtype == "float64"), default=None)
    if rel is None or not rel < 1e-2:
        return ""
    return (f". Your float64 output is close to the correct one everywhere (largest difference {rel:.2g} "
            f"of its size), as when part of forward computes in a lower precision (float16 or bfloat16 "
            f"lose about 1e-3, float32 about 1e-7): compute in the input's dtype")


def _sdpa_math(student, found: Diagnosis, *_):
    """Code that is right only on the default CPU kernel: SDPA given both attn_mask and
    is_causal=True, or .view() on SDPA's output, whose memory layout differs between kernels."""
    padded = probes()[2]
    try:
        student.new(DIM, HEADS).map([padded.args], context="math_sdpa")
    except StudentCodeError as err:
        forced = f"with PyTorch's math SDPA backend forced (as on other hardware), your forward raises {err.describe()}"
        if "is_causal" in err.message:
            found.add("sdpa_mask_and_is_causal", None, forced)
        elif "view size is not compatible" in err.message:
            found.add("view_without_contiguous", "only_on_the_default_kernel", forced)


def _exception(student, found: Diagnosis, err: StudentCodeError, dim: int, heads: int, dtype: str):
    """What made the forward raise, told by what happens when it runs again (not by the message):
    it runs without autograd (an in-place change of a tensor autograd still needs, such as a view
    that split() returned), or with views that copy where a tensor's layout allows no view."""
    params = _probe_params(dim, heads, dtype)
    short = [p.args for p in probes(dim, heads, dtype) if not p.long]
    for context, bug_id, variant, why in (
            ("no_grad", "breaks_autograd", "raises_with_autograd",
             "it runs under torch.no_grad(): an operation autograd cannot record, such as an in-place change of a view"),
            ("views_of_any_layout", "view_without_contiguous", None,
             "it runs when .view() may copy, as .reshape() does: a view of a transposed tensor")):
        try:   # the call that raised, the same weights and inputs, inside the context
            student.new(dim, heads, dtype=dtype, params=params).map(short, context=context)
        except (StudentCodeError, WorkerFailure):
            continue
        found.add(bug_id, variant, f"your forward raised {err.describe()}; {why}")
        return
    kept = _kept_from_the_first_call(student, params, short, dim, heads, dtype)
    if kept:
        found.add("fixed_max_length", "sized_at_first_call", f"your forward raised {err.describe()}; {kept}")
        return
    found.unexplained = (f"your forward raised {err.describe()}, and no mistake in the catalog "
                         f"explains this exception")


def _kept_from_the_first_call(student, params: dict, calls: list, dim: int, heads: int, dtype: str) -> str | None:
    """Why the forward raised, when what it raised comes from an earlier call of the same module (a
    mask sized by the first call and kept): each call runs on a module of its own, and a module
    first called with the shortest sequence raises when it is called with the longest next."""
    try:
        for args in calls:
            student.new(dim, heads, dtype=dtype, params=params).map([args])
    except (StudentCodeError, WorkerFailure):
        return None
    by_length = {args[0].shape[1]: args for args in calls}
    short, long = min(by_length), max(by_length)
    try:
        student.new(dim, heads, dtype=dtype, params=params).map([by_length[short], by_length[long]])
    except StudentCodeError:
        return (f"every call runs on a new module, but a module first called with T = {short} raises when "
                f"it is called with T = {long} next: what it builds at its first call (a mask of that "
                f"length) is kept for the calls after it")
    except WorkerFailure:
        return None
    return None


# -- properties --------------------------------------------------------------------------------------
AUTOGRAD_ERRORS = [
    ("does not require grad", "no_grad"),
    ("modified by an inplace operation", "inplace"),
    ("not have been used in the graph", "detached_input"),
]


def _autograd(student, found: Diagnosis, *_):
    if "nondeterministic_dropout" in found.ids():
        return  # random outputs make finite differences meaningless
    module = student.new(DIM, HEADS)
    x = random_input(2, 6, DIM, seed=904)
    cotangent = random_input(1, 2 * 6, DIM, seed=905).reshape(1, 2, 6, DIM)
    direction = random_input(2, 6, DIM, seed=906)
    (steps,) = finite_difference_jvps(module, x, None, [direction])     # [(estimate, uncertainty)]
    first = steps[0][0]
    if first.shape != x.shape or not first.is_floating_point():
        return  # the interface tests report the output's shape or dtype
    if all(not est.any() for est, _ in steps):
        return  # the output ignores the input: nothing for autograd to carry (the tests say so)
    finite = torch.stack([torch.isfinite(est) for est, _ in steps]).all(dim=0)   # NaN rows (no key left) say nothing
    cotangent = torch.where(finite, cotangent, torch.zeros(()))
    try:
        grad = module.vjp(x, cotangents=cotangent)[0]
    except StudentCodeError as err:
        # The forward ran (the finite differences above) and the backward pass did not: autograd
        # cannot carry the layer, whatever the message says; the message only tells which way.
        variant = next((v for text, v in AUTOGRAD_ERRORS if text in err.message), "backward_raises")
        found.add("breaks_autograd", variant, f"a backward pass raised {err.describe()}")
        return
    from_autograd = (grad.double() * direction).sum().reshape(1)
    if not torch.isfinite(from_autograd).all():
        return  # a NaN gradient tells nothing about what autograd sees; the tests grade the NaN
    numeric = [((est.nan_to_num() * cotangent[0]).sum().reshape(1),
                (unc.nan_to_num() * cotangent[0].abs()).sum().reshape(1)) for est, unc in steps]
    # Off at every step, or (where no mistake of the forward was found) at the step whose estimate
    # is surest: a gradient off by a few percent (a softmax's normaliser under no_grad) agrees with
    # a long step's loose estimate. A forward mistake may cut a trace of the graph in passing (a
    # fill of scores.min().item()): its fix is that mistake's, and it gets no second name for it.
    surest = min(numeric, key=lambda n: float(n[1]))
    atol = 1e-6 * max(1.0, float(numeric[0][0].abs()))
    if not gradient_agrees(from_autograd, numeric, atol=atol).all() or (
            not found.ids() and not gradient_agrees(from_autograd, [surest], atol=atol).all()):
        tightest = float(surest[0])
        found.add("breaks_autograd", "detached",
                  f"nudging the input changes the output at rate {tightest:.4g} (finite differences, to "
                  f"within {float(surest[1]):.1g}), but the gradient your module reports gives "
                  f"{float(from_autograd):.4g}: part of forward is hidden from autograd")


DRAWS = 8   # training-mode calls: 8 x 4 sequences x 4 heads, so dropout of 1 in 10 heads shows at once


def _training_mode(student, found: Diagnosis, *_):
    """Dropout seen in training mode: calls with the same input that differ from each other, or
    from eval mode by one factor (the 1/(1-p) rescale of the kept values, there even when a draw
    drops nothing). The output projection is set to the identity, so the output is the heads'
    output and the evidence can say what was dropped: single weights, whole rows, whole heads."""
    if "nondeterministic_dropout" in found.ids():
        return
    weights = reference.random_weights(DIM, seed=907)
    weights.update({"proj.weight": torch.eye(DIM, dtype=torch.float64), "proj.bias": torch.zeros(DIM, dtype=torch.float64)})
    x = random_input(4, 6, DIM, seed=907)
    modules = []
    for train in (True, False):
        modules.append(student.new(DIM, HEADS, train=train))
        modules[-1].set_params(weights)
    draws = [d.double() for d in modules[0].map([(x,)] * DRAWS)]
    calm = modules[1].map([(x,)])[0].double()
    if all(_same(d, calm) for d in draws) or any(d.shape != calm.shape for d in draws):
        return
    random = any(not _same(d, draws[0]) for d in draws[1:])
    pattern, factor = _dropped(draws, calm)
    if not random and factor is None:
        return  # training mode computes something else, the same every time: not dropout
    parts = [f"{sum(not _same(d, calm) for d in draws)} of {DRAWS} training-mode calls with the same "
             f"input differ from eval mode" + (" and from each other" if random else "")]
    if factor is not None:
        parts.append(f"the values kept are scaled by {factor:.4g} = 1/(1 - p) with p = {1 - 1 / factor:.3g}, "
                     f"dropout's rescale")
    if pattern:
        parts.append(f"what is dropped: {pattern}")
    found.add("nondeterministic_dropout", "training_mode", "; ".join(parts))


def _dropped(draws: list[torch.Tensor], calm: torch.Tensor) -> tuple[str, float | None]:
    """What dropout removed, from the heads' outputs (B, T, dim) in training and in eval mode: whole
    heads of one sequence, single rows (one position of one head), or single attention weights (a row
    that is neither zero nor its eval value scaled); and the factor the kept rows are scaled by."""
    B, T, _ = calm.shape
    heads = lambda t: t.reshape(B, T, HEADS, DIM // HEADS)   # noqa: E731  (B, T, H, head_dim)
    ref = heads(calm)
    zero_rows, mixed, ratios = [], False, []
    for d in draws:
        row = heads(d)
        zero = (row.abs() < 1e-12).all(-1) & (ref.abs() > 1e-9).any(-1)                  # (B, T, H)
        big = ref.abs() > 1e-6
        ratio = torch.where(big, row / torch.where(big, ref, torch.ones(())), torch.full((), float("nan")))
        level = ratio.nanmedian(dim=-1).values                                         # (B, T, H)
        scaled = torch.isclose(ratio, level[..., None], rtol=1e-5, atol=0).logical_or(~big).all(-1)
        mixed = mixed or bool((~zero & ~scaled).any())
        ratios += level[~zero & scaled].tolist()
        zero_rows.append(zero)
    factors = sorted(r for r in ratios if math.isfinite(r))
    factor = factors[len(factors) // 2] if factors else None
    if factor is not None and not (abs(factor - 1) > 1e-6 and all(math.isclose(r, factor, rel_tol=1e-5) for r in factors)):
        factor = None
    zero = torch.stack(zero_rows)                                                      # (draws, B, T, H)
    if mixed:
        return "single attention weights (outputs that are neither dropped nor rescaled whole)", factor
    if not zero.any():
        return "", factor
    whole = bool((zero.all(dim=2) == zero.any(dim=2)).all())   # per (draw, sequence, head): all T or none
    shown = f"{int(zero.sum())} of {zero.numel()} (position, head) rows over {DRAWS} calls"
    if whole:
        return f"whole heads of one sequence at a time ({int(zero.any(dim=2).sum())} of {zero.numel() // T} (sequence, head) pairs over {DRAWS} calls)", factor
    return f"single rows, one position of one head ({shown})", factor


def device_advice(student) -> Finding | None:
    """Run last (see test_07_advice.py): the meta device makes torch import torch._dynamo, which
    the worker has been importing in the background while the tests ran."""
    found = Diagnosis()
    try:
        _devices(student, found)
    except (StudentCodeError, WorkerFailure, RuntimeError, TypeError, ValueError):
        return None
    return found.findings[0] if found.findings else None


def _devices(student, found: Diagnosis, *_):
    module = student.new(DIM, HEADS)
    x = random_input(2, 6, DIM, seed=908)
    for args in ((x,), (x, reference.right_padding([6, 3], 6))):
        try:
            module.shape_on("meta", *args, one_device=True)
        except StudentCodeError as err:
            if "device" in err.message and ("cpu" in err.message or "same device" in err.message):
                found.add("mask_device_mismatch", None,
                          f"advice (it costs no points here): with the module and its input on PyTorch's meta "
                          f"device, a stand-in for a GPU, and every torch operation checking that its tensors "
                          f"share one device as a GPU does, forward raised {err.describe()}")
            return


FORBIDDEN_NAMES = ("MultiheadAttention", "multi_head_attention_forward", "_native_multi_head_attention",
                   "_transformer_encoder_layer_fwd")


def _forbidden(student, found: Diagnosis, source_lines, locate):
    """Two signs, either enough: the code the class can reach names a forbidden built-in (read
    by the harness from the bytes Python compiled, so the student cannot hide it at run time;
    scan.py), or the worker refused one or something no honest solution needs (audit.py, so no text trick hides it). A source
    the scan cannot read is a finding too: the check must never pass by silence."""
    try:
        hit = scan.find_forbidden(student.source, FORBIDDEN_NAMES, inside_class=student.entry.name)
    except scan.ScanError as err:
        found.add("uses_forbidden_builtin", "unscannable",
                  f"the grader could not read your source to check that your class does not use "
                  f"nn.MultiheadAttention ({err})")
        return
    if hit is not None:
        found.add("uses_forbidden_builtin", None, f"your class uses {hit.what} at {locate(hit.line)}")
        return
    evidence = forbidden_at_run_time(student)
    if evidence:
        found.add("uses_forbidden_builtin", "at_run_time", evidence)


def forbidden_at_run_time(student) -> str | None:
    """What the workers refused so far (every call of every test; see sandbox/audit.py), or None."""
    from sandbox.audit import describe_refusals
    return describe_refusals(student.calls_to_watched())
