"""Per-entry autograd state of a tape, in a room of its own."""


class EntryState:
    """What the autograd layer keeps about some entries of a tape, in a room of its own
    (the tape's columns know none of it): each a dict (or set) keyed by entry index."""
    __slots__ = ("retained", "views", "hooks", "hook_dtypes", "node_hooks", "packed",
                 "functions", "modified", "bases", "composite_inputs", "composite_reads", "kept")

    def __init__(self):
        self.retained = {}       # non-leaf Tensor that retains its grad
        self.views = {}          # cached Node view (a hooked leaf: its AccumulateGrad)
        self.hooks = {}          # {handle id: tensor hook}
        self.hook_dtypes = {}    # dtype of the hooked tensor
        self.node_hooks = {}     # NodeHooks of its Node (Node.register_hook / prehook)
        self.packed = {}         # its saved values packed by saved_tensors_hooks
        self.functions = {}      # the custom Function call it is an output of
        self.modified = {}       # (tensor, version now, version saved, first entry after,
                                 # through .data): in-place ops
        self.bases = {}          # a view's: the entry it viewed, its output index if it is
                                 # one of several views (unbind, split), else None
        self.composite_inputs = {}   # a composite op's inputs' buffers (-1: none; ("t", b):
                                     # b read transposed in place), in order
        self.composite_reads = {}    # a composite op's first entry, and its inputs' buffers
                                     # that PyTorch's one backward op reads
        self.kept = set()            # where entries that are ``adjoint_rules.read_with``'s
