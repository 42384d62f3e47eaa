"""Compiled (Numba) kernels over the tape's flat arrays; they know no Python objects."""
