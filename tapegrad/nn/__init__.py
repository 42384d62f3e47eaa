"""``tapegrad.nn``: so far the functional forms of the op table's activations."""
from . import functional  # noqa: F401
