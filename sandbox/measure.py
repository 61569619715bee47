"""Measuring the student's module with references the worker took before the student's code ran.

A module's parameters, as `nn.Module.parameters()` defines them (every registered parameter of
the module and its registered submodules, each counted once), found without calling anything the
student's code can override or patch: not the module's `parameters()` or `named_parameters()`, not
a `Parameter` subclass's `numel()` or `shape`, not `torch.Tensor` methods, and not a dict
subclass's `items()`. The references sit in keyword defaults, bound when `walker()` runs.
"""
from __future__ import annotations


def walker():
    """A function module -> [(name, shape, numel)] bound to the references of this moment."""
    import torch

    def parameters(module, *, _get=object.__getattribute__, _dict_get=dict.get, _items=dict.items,
                   _numel=torch._C.TensorBase.numel, _size=torch._C.TensorBase.size,
                   _plain=torch._C.DisableTorchFunction, _id=id, _tuple=tuple, _int=int,
                   _reversed=reversed, _list=list) -> list:
        found, seen_params, seen_modules = [], set(), set()
        stack = [("", module)]
        with _plain():  # no __torch_function__ of a Tensor subclass runs in here
            while stack:
                prefix, current = stack.pop()
                if _id(current) in seen_modules:
                    continue
                seen_modules.add(_id(current))
                state = _get(current, "__dict__")
                for name, param in _items(_dict_get(state, "_parameters")):
                    if param is not None and _id(param) not in seen_params:
                        seen_params.add(_id(param))
                        found.append((prefix + name, [_int(s) for s in _tuple(_size(param))], _int(_numel(param))))
                children = [(prefix + name + ".", child) for name, child in _items(_dict_get(state, "_modules"))
                            if child is not None]
                stack.extend(_reversed(children))
        return found
    return parameters
