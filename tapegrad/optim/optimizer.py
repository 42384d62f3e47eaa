"""``Optimizer``: parameter groups with per-group options, per-parameter state, state dicts.

Subclasses implement ``_update(group, params)``, which receives the group's parameters
that have a gradient and gives each one (and each state tensor) its new value with
``write``; ``step`` runs it under ``no_grad``, so nothing is recorded and the version
counters see the updates, as in PyTorch.
"""
import collections
import itertools

import numpy as np

from ..grad_mode import enable_grad, no_grad
from ..inplace import set_value_
from ..nn.module import typename, zero_grads
from ..tensor import Tensor, from_array


def flat(t):
    """The values of tensor ``t`` as a flat array (a view, never to be written to)."""
    d = t._d
    return np.array([d]) if d.__class__ is float else d.reshape(-1)


def write(t, out):
    """Tensor ``t`` takes the flat array ``out`` (fresh, now owned by ``t``) as its
    value, in place: same tensor object, version + 1."""
    set_value_(t, out.reshape(np.shape(t._d)))


def state_tensor(p, flat_values):
    """A new state tensor of ``p``'s shape and dtype holding ``flat_values``."""
    return from_array(np.asarray(flat_values, p._arr.dtype).reshape(np.shape(p._d)))


class Optimizer:
    def __init__(self, params, defaults):
        if defaults.get("differentiable"):
            raise NotImplementedError("differentiable=True is not supported by tapegrad's "
                                      "optimizers (their steps are never recorded)")
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + typename(params))
        self.state = collections.defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if len(groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                "is " + typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            param_group.setdefault(name, default)
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        zero_grads(itertools.chain.from_iterable(g["params"] for g in self.param_groups),
                   set_to_none)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._update(group, params)
        return loss

    def _update(self, group, params):
        raise NotImplementedError

    # -- state dicts -------------------------------------------------------------------
    def state_dict(self):
        """{'state': {index: per-parameter state}, 'param_groups': [options + 'params':
        indices]}: parameters are numbered in group order, as PyTorch does."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)] if isinstance(p, Tensor) else p: s for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Take the options and per-parameter state of ``state_dict`` (copied; floating
        state cast to its parameter's dtype, except 'step')."""
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"])
               for g, s in zip(self.param_groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(itertools.chain.from_iterable(s["params"] for s in saved_groups),
                          itertools.chain.from_iterable(g["params"] for g in self.param_groups)))
        state = collections.defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                p = id_map[k]
                state[p] = {key: _cast(p, key, value) for key, value in v.items()}
            else:
                state[k] = v
        groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            new = {k: v for k, v in saved.items()}
            new["params"] = group["params"]
            if "param_names" in group and "param_names" not in new:
                new["param_names"] = group["param_names"]
            groups.append(new)
        self.state, self.param_groups = state, groups

    def __repr__(self):
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def _cast(param, key, value):
    if not isinstance(value, Tensor):
        return value
    arr = value._arr
    if key != "step" and param.is_floating_point():
        arr = arr.astype(param._arr.dtype)
    return from_array(np.array(arr))
