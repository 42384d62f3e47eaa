"""The op table's rule language, walked once for every algebra that evaluates it.

A rule (``Op.fwd``, ``Op.gx``, ``Op.gy``) is a Python expression in ``x y r g c2`` that
uses arithmetic, comparisons, ``a if c else b``, ``abs``, the functions of ``MATH`` and
the helpers of ``scalar_math`` (``sm.name``).  A helper's body is assignments and
``if c: return a`` statements, and may call other helpers by their bare name.

The same source runs four ways: Python on floats (the 0-d fast path), and through
``Walker`` for the algebras that cannot run Python directly: Numba source with the
helpers inlined (``kernels.codegen``: one compiled unit per dispatch function), the
LLVM lowering of a replay tape (IR text) and ``create_graph``'s tensor rules (tapegrad
ops, so that a gradient is itself differentiable).  A new op or helper needs nothing but its table entry and its
Python source: no algebra keeps a copy of it.
"""
import ast
import functools
import inspect
import math

from . import scalar_math

# The math functions a rule may call (``math.name``), with their arity: each is C's libm
# function in Python, Numba (fmod: NumPy's, which is C's) and the LLVM lowering, and the table
# op of that name on tensors.
MATH = {"exp": 1, "log": 1, "log1p": 1, "expm1": 1, "sqrt": 1, "sin": 1, "cos": 1, "tan": 1,
        "tanh": 1, "erf": 1, "hypot": 2, "atan": 1, "atan2": 2, "fmod": 2}
HELPERS = tuple(n for n, f in inspect.getmembers(scalar_math, inspect.isfunction)
                if f.__module__ == scalar_math.__name__)
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class RuleError(ValueError):
    """A rule uses something outside the rule language."""


@functools.lru_cache(maxsize=None)
def parse(text):
    return ast.parse(text, mode="eval").body


@functools.lru_cache(maxsize=None)
def helper_def(name):
    """(parameter names, body statements without the docstring) of a helper."""
    tree = ast.parse(inspect.getsource(getattr(scalar_math, name))).body[0]
    body = [s for s in tree.body
            if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return tuple(a.arg for a in tree.args.args), tuple(body)


def helpers_called(text):
    """The helpers a rule calls, directly or through other helpers."""
    seen, todo = set(), [parse(text)]
    while todo:
        for n in ast.walk(todo.pop()):
            name = _helper_name(n.func) if isinstance(n, ast.Call) else None
            if name and name not in seen:
                seen.add(name)
                todo.extend(helper_def(name)[1])
    return seen


def _helper_name(f):
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "sm":
        return f.attr
    if isinstance(f, ast.Name) and f.id in HELPERS:
        return f.id
    return None


class Walker:
    """Evaluates rules over an algebra that subclasses supply:

    ``const(v)``, ``neg(a)``, ``arith(op, a, b)`` (op one of ``+ - * / **``),
    ``compare(op, a, b)``, ``logic(op, a, b)`` (``and``/``or``), ``select(c, a, b)``,
    ``math(name, args)`` (``MATH`` and ``abs``) and ``helper(name, args)`` (default: the
    helper's body walked inline).  ``branch`` decides how ``if`` evaluates its sides.
    """

    def expr(self, text, env):
        return self.node(parse(text), env)

    def helper(self, name, args):
        params, body = helper_def(name)
        return self.body(body, dict(zip(params, args)))

    def branch(self, test, env, then, other):
        """``then()`` if the condition node ``test`` holds else ``other()``: both sides
        evaluated and selected (thunks, so that an algebra may evaluate one side only)."""
        return self.select(self.node(test, env), then(), other())

    def node(self, n, env):
        if isinstance(n, ast.Name):
            return env[n.id]
        if isinstance(n, ast.Constant):
            return self.const(float(n.value))
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "math":
            return self.const(float(getattr(math, n.attr)))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return self.neg(self.node(n.operand, env))
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITH:
            return self.arith(_ARITH[type(n.op)], self.node(n.left, env), self.node(n.right, env))
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMP:
            return self.compare(_CMP[type(n.ops[0])], self.node(n.left, env),
                                self.node(n.comparators[0], env))
        if isinstance(n, ast.BoolOp):
            op = "and" if isinstance(n.op, ast.And) else "or"
            out = self.node(n.values[0], env)
            for v in n.values[1:]:
                out = self.logic(op, out, self.node(v, env))
            return out
        if isinstance(n, ast.IfExp):
            return self.branch(n.test, env, lambda: self.node(n.body, env),
                               lambda: self.node(n.orelse, env))
        if isinstance(n, ast.Call):
            args = [self.node(a, env) for a in n.args]
            f, name = n.func, _helper_name(n.func)
            if name is not None:
                return self.helper(name, args)
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    f.value.id == "math" and MATH.get(f.attr) == len(args):
                return self.math(f.attr, args)
            if isinstance(f, ast.Name) and f.id == "abs" and len(args) == 1:
                return self.math("abs", args)
        raise RuleError(f"not in the rule language: {ast.unparse(n)}")

    def body(self, stmts, env):
        """A helper's statements as one value: ``if c: ...return a`` then the rest is
        ``select(c, a, rest)``."""
        env = dict(env)
        for k, st in enumerate(stmts):
            if isinstance(st, ast.Return):
                return self.node(st.value, env)
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and \
                    isinstance(st.targets[0], ast.Name):
                env[st.targets[0].id] = self.node(st.value, env)
            elif isinstance(st, ast.If):
                rest = list(st.orelse) + list(stmts[k + 1:])
                return self.branch(st.test, env, lambda: self.body(st.body, env),
                                   lambda: self.body(rest, env))
            else:
                raise RuleError(f"not in the rule language: {ast.unparse(st)}")
        raise RuleError("a helper without a return")
