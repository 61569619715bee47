"""The source scan for forbidden built-ins (exercise/causal_self_attention/scan.py), on sources a
student could submit: every statement at every depth, every import form, strings built from
pieces, the separators Python keeps inside a comment, and a source built to make a scan slow."""
import time

import pytest

from exercise.causal_self_attention.diagnosis import FORBIDDEN_NAMES, Diagnosis, _forbidden
from exercise.causal_self_attention.scan import ScanError, find_forbidden

pytestmark = pytest.mark.unit  # the whole module runs in this process (the fast lane)

HEAD = "import importlib\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
CLASS = ("class CausalSelfAttention(nn.Module):\n"
         "    def forward(self, x, key_padding_mask=None):\n"
         "        return {}\n")


def scan(source):
    return find_forbidden(source, FORBIDDEN_NAMES, inside_class="CausalSelfAttention")


DELEGATING = {
    "class inside if": HEAD + "if True:\n" + "".join("    " + line + "\n" for line in
                                                      CLASS.format("nn.MultiheadAttention(4, 1)(x, x, x)").splitlines()),
    "class inside try/else": HEAD + "try:\n    pass\nexcept Exception:\n    pass\nelse:\n"
                             + "".join("    " + line + "\n" for line in CLASS.format("F.multi_head_attention_forward(x)").splitlines()),
    "from-import alias": HEAD + "from torch.nn.functional import multi_head_attention_forward as attend\n" + CLASS.format("attend(x)"),
    "import alias of the class": HEAD + "from torch.nn import MultiheadAttention as M\n" + CLASS.format("M(4, 1)(x, x, x)"),
    "module alias": HEAD + "import torch.nn.modules.activation as act\n" + CLASS.format("act.MultiheadAttention(4, 1)(x, x, x)"),
    "fused operator": HEAD + CLASS.format("torch._native_multi_head_attention(x)"),
    "getattr with a built name": HEAD + CLASS.format("getattr(nn, 'Multi' + 'head' + 'Attention')(4, 1)(x, x, x)"),
    "getattr with a reversed name": HEAD + CLASS.format("getattr(nn, ''.join(reversed('noitnettAdaehitluM')))(4, 1)"),
    "getattr with chr codes": HEAD + CLASS.format(
        "getattr(nn, ''.join(map(chr, [77, 117, 108, 116, 105, 104, 101, 97, 100, 65, 116, 116, 101, 110, 116, 105, 111, 110])))"),
    "f-string name": HEAD + CLASS.format("getattr(F, f'{\"multi_head\"}_attention_forward')(x)"),
    "importlib": HEAD + CLASS.format("importlib.import_module('torch.nn.modules.activation').MultiheadAttention"),
    "__import__": HEAD + CLASS.format("__import__('torch').nn.functional.multi_head_attention_forward(x)"),
    "eval of a string": HEAD + CLASS.format("eval('nn.MultiheadAttention')(4, 1)"),
    "helper inside a function": HEAD + "def make():\n    def helper(x):\n        return nn.MultiheadAttention(4, 1)(x, x, x)\n"
                                "    return helper\nhelp_me = make()\n" + CLASS.format("help_me(x)"),
    "lambda": HEAD + "attend = lambda x: F.multi_head_attention_forward(x)\n" + CLASS.format("attend(x)"),
    "alias assigned in a loop": HEAD + "for attend in [F.multi_head_attention_forward]:\n    break\n" + CLASS.format("attend(x)"),
    "alias set by global in a function": HEAD + "def setup():\n    global attend\n    attend = nn.MultiheadAttention\nsetup()\n"
                                         + CLASS.format("attend(4, 1)"),
    "walrus": HEAD + "if (attend := F.multi_head_attention_forward):\n    pass\n" + CLASS.format("attend(x)"),
    "with target": HEAD + "import contextlib\nwith contextlib.nullcontext(nn.MultiheadAttention) as M:\n    pass\n"
                   + CLASS.format("M(4, 1)"),
    "class made in a function": HEAD + "def build():\n" + "".join("    " + line + "\n" for line in
                                CLASS.format("nn.MultiheadAttention(4, 1)").splitlines())
                                + "    return CausalSelfAttention\nglobals()['CausalSelfAttention'] = build()\n",
    "base class reached by name": HEAD + "class Base(nn.Module):\n    def attend(self, x):\n        return nn.MultiheadAttention(4, 1)\n"
                                  + CLASS.format("x").replace("(nn.Module)", "(Base)"),
    "method replaced after the class": HEAD + CLASS.format("x") + "def attend(self, x):\n    return nn.MultiheadAttention(4, 1)\n"
                                       "CausalSelfAttention.forward = attend\n",
    "method set with setattr": HEAD + CLASS.format("x") + "setattr(CausalSelfAttention, 'forward', lambda self, x: "
                                                          "F.multi_head_attention_forward(x))\n",
    "self-test that the class uses": HEAD + CLASS.format("attend(x)")
                                     + "if __name__ == '__main__':\n    attend = nn.MultiheadAttention(4, 1)\n",
}


@pytest.mark.parametrize("source", DELEGATING.values(), ids=DELEGATING.keys())
def test_delegation_is_found_at_any_depth_and_through_any_name(source):
    assert scan(source) is not None


HONEST = {
    "sdpa": HEAD + CLASS.format("F.scaled_dot_product_attention(x, x, x, is_causal=True)"),
    "docstring naming the built-in": HEAD + CLASS.format("x").replace(
        "    def forward", '    """The same output as nn.MultiheadAttention with a causal mask."""\n    def forward'),
    "self-test the class cannot reach": HEAD + CLASS.format("F.scaled_dot_product_attention(x, x, x)")
        + "if __name__ == '__main__':\n    x = torch.randn(2, 3, 4)\n    out = nn.MultiheadAttention(4, 1)(x, x, x)\n"
          "    ref = F.multi_head_attention_forward\n",
    "a local named like a self-test global": HEAD + CLASS.format("x").replace(
        "        return x", "        out = x\n        return out") + "if __name__ == '__main__':\n    out = nn.MultiheadAttention(4, 1)\n",
}


@pytest.mark.parametrize("source", HONEST.values(), ids=HONEST.keys())
def test_honest_code_and_unreachable_self_tests_are_not_flagged(source):
    assert scan(source) is None


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_separators_python_keeps_in_a_comment_do_not_stop_the_scan(separator):
    source = HEAD + f"# a remark{separator}    ) that Python reads as part of the comment\n" \
        + CLASS.format("nn.MultiheadAttention(4, 1)(x, x, x)")
    compile(source.encode(), "submission.py", "exec")  # what Python accepts
    hit = scan(source.encode())
    assert hit is not None and hit.line == 8


def test_the_scan_reads_the_bytes_as_python_decodes_them():
    source = "# -*- coding: latin-1 -*-\n# Lösung\n".encode("latin-1") + \
        (HEAD + CLASS.format("nn.MultiheadAttention(4, 1)")).encode()
    assert scan(source).line == 9


def test_a_source_the_scan_cannot_read_is_a_finding_not_silence():
    with pytest.raises(ScanError):
        scan(b"class CausalSelfAttention(:\n")

    class Student:
        source = b""
        entry = type("Entry", (), {"name": "CausalSelfAttention"})

    found = Diagnosis()
    _forbidden(Student(), found, [], lambda line: f"line {line}")
    assert [(f.id, f.variant) for f in found.findings] == [("uses_forbidden_builtin", "unscannable")]


def test_thousands_of_definitions_of_one_name_cost_linear_time():
    """20,000 definitions of `f`, each naming `f` (about 300 KB, under the grader's size limit):
    a scan that followed each name to every definition again would do 400 million steps."""
    n = 20_000
    source = HEAD + "".join(f"def f(x):\n    return f(x) + {i}\n" for i in range(2000)) \
        + "def f():\n    f\n" * (n - 2000) + CLASS.format("f(x)")
    started = time.perf_counter()
    assert scan(source) is None
    assert time.perf_counter() - started < 60  # a sanity bound on a shared machine; measured ~3 s
