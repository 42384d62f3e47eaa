"""The op table (``table.OPS``) and the scalar helpers its rules use."""
from .table import OPS, BY_NAME, CODE, KINDS, Op, kind_range  # noqa: F401
