"""Layers only look down: every import in ``tapegrad/``, function-level ones included,
goes to a module of the same layer or a lower one.

    base (grad modes, dtypes) <- op table <- tape <- kernels <- engine
        <- Tensor / API (tensors, ops, autograd, replay) <- tools (viz, nn, optim)
        <- the package root (``tapegrad/__init__``, which re-exports everything, as
           ``torch`` does)

Within the API layer the modules form no circle but one: Tensor <-> autograd (a
tensor's ``backward`` and ``grad_fn`` are autograd's; autograd works on tensors).  The
packages ``autograd`` and ``replay`` count as one module each there.  The engine
reaches the autograd layer's Python only through the callbacks that layer registers
(``engine.CALLBACKS``), and works on tapes, arrays and entry indices: it reads no
attribute that only a Tensor has.
"""
import ast
import os

import tapegrad

ROOT = os.path.dirname(tapegrad.__file__)
LAYERS = [
    ("base", ["tapegrad.grad_mode", "tapegrad.dtypes"]),
    ("op table", ["tapegrad.ops"]),
    ("tape", ["tapegrad.tape", "tapegrad.record", "tapegrad.tracing"]),
    ("kernels", ["tapegrad.kernels"]),
    ("engine", ["tapegrad.autograd.engine", "tapegrad.autograd.sweeps"]),
    ("api", ["tapegrad.tensor", "tapegrad.composite", "tapegrad.elementwise",
             "tapegrad.shape_ops", "tapegrad.reductions", "tapegrad.linalg", "tapegrad.linalg_ops",
             "tapegrad.factories",
             "tapegrad.inplace", "tapegrad.views", "tapegrad.softmax_ops", "tapegrad.tensor_methods",
             "tapegrad.devices", "tapegrad.cuda", "tapegrad.shape_extras",
             "tapegrad.scan_ops", "tapegrad.extra_ops", "tapegrad.more_ops",
             "tapegrad.special", "tapegrad.division",
             "tapegrad.autograd",
             "tapegrad.replay"]),
    ("tools", ["tapegrad.viz", "tapegrad.nn", "tapegrad.optim"]),
    ("root", ["tapegrad"]),
]
ALLOWED_CIRCLE = {("tapegrad.tensor", "tapegrad.autograd")}   # (autograd -> tensor: down)
def layer(module):
    """The layer of a module: the longest prefix listed."""
    best = None
    for k, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and \
                    (best is None or len(p) > len(best[1])):
                best = (k, p)
    assert best is not None, f"{module} has no layer: add it to LAYERS"
    return best[0]


def _modules():
    for folder, _, files in os.walk(ROOT):
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                yield (rel[:-len(".__init__")] if rel.endswith(".__init__") else rel), path


def _is_module(name):
    base = os.path.join(os.path.dirname(ROOT), *name.split("."))
    return os.path.isdir(base) or os.path.exists(base + ".py")


def imports(module, path):
    """The tapegrad modules ``module`` imports (``from X import Y``: Y where Y is a
    module, else X), with their line numbers."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module
            for a in node.names:
                sub = f"{base}.{a.name}"
                yield (sub if _is_module(sub) else base), node.lineno


def upward():
    found = {}
    for module, path in _modules():
        for target, line in imports(module, path):
            if target.split(".")[0] == "tapegrad" and layer(target) > layer(module):
                found.setdefault((module, target), line)
    return found


def test_imports_only_look_down():
    found = upward()
    assert not found, "imports that run up the layer map: " + ", ".join(
        f"{m} (line {line}) -> {t}" for (m, t), line in sorted(found.items()))


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from ..viz import drawing\n    import tapegrad.nn\n")
    got = dict(imports("tapegrad.kernels.m", str(src)))
    assert got == {"tapegrad.viz.drawing": 2, "tapegrad.nn": 3}
    assert layer("tapegrad.viz.drawing") > layer("tapegrad.kernels.m")


# what a Tensor has and a tape, an array or an entry's record has not
TENSOR_ONLY = {"_d", "_t", "_tid", "_i", "_rg", "_arr", "_version", "_retains", "grad_fn",
               "requires_grad", "is_leaf"}


def tensor_reads(path):
    """(attribute, line) of each read of a Tensor-only attribute in the file."""
    with open(path) as f:
        tree = ast.parse(f.read())
    return [(n.attr, n.lineno) for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in TENSOR_ONLY]


def test_the_engine_reads_no_tensor():
    """The engine takes (tape, entry, seed) triples and hands (tape, leaf entries,
    gradients) upward: the autograd layer maps them to tensors (``entry_points.sweep``)."""
    found = {module: tensor_reads(path) for module, path in _modules()
             if LAYERS[layer(module)][0] == "engine"}
    assert not any(found.values()), f"Tensor attributes read by the engine: {found}"


def _unit(module):
    """A module of the API layer as the circle check counts it (a package as one)."""
    for p in ("tapegrad.autograd", "tapegrad.replay"):
        if module == p or module.startswith(p + "."):
            return p
    return module


def circles(edges):
    """The groups of units that import each other round a circle ({a: {b, ...}}: a
    imports b), each a sorted tuple."""
    def reach(a):
        seen, todo = set(), [a]
        while todo:
            for b in edges.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen
    found = {a: reach(a) for a in edges}
    return sorted({tuple(sorted(b for b in found[a] if a in found.get(b, ())))
                   for a in edges if a in found[a]})


def api_edges():
    api = next(k for k, (name, _) in enumerate(LAYERS) if name == "api")
    edges = {}
    for module, path in _modules():
        if layer(module) != api:
            continue
        for target, _ in imports(module, path):
            if target.split(".")[0] == "tapegrad" and layer(target) == api:
                a, b = _unit(module), _unit(target)
                if a != b and (a, b) not in ALLOWED_CIRCLE:
                    edges.setdefault(a, set()).add(b)
    return edges


def test_the_api_layer_has_no_circle_but_tensor_and_autograd():
    found = circles(api_edges())
    assert not found, "modules of the API layer that import each other round a circle: " + \
        "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [("a", "b", "c")]
    assert circles({"a": {"b"}, "b": {"c"}}) == []
