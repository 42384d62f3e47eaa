"""The container of a saved replay: a zip of ``.npy`` members, as ``np.savez`` writes it,
read without trusting it.

``np.load`` would allocate whatever size a member's header declares, return raw bytes for
a member that is not an array, and hand on any dtype.  ``Archive`` lists the members
first (each must be stored, uncompressed as ``np.savez`` writes it, so that nothing
expands past the file's own length) and reads one only when asked for it with the dtype
expected there: its ``.npy`` header must declare a 1-D array of exactly that dtype whose
data fills the member; only then does ``np.lib.format.read_array(..., allow_pickle=False)``
read it.  Any fault of the file (not a zip, truncated, a bad checksum) is a
``ReplayFileError``.
"""
import os
import zipfile

import numpy as np

from .validate import ReplayFileError

_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0,
            (2, 0): np.lib.format.read_array_header_2_0}


def write(path, members):
    """Write ``{name: array}`` as an ``.npz`` (``np.savez``: stored members)."""
    np.savez(path, **members)


def _reading(fn, *args):
    """``fn(*args)``, any error of a damaged file raised as a ``ReplayFileError``."""
    try:
        return fn(*args)
    except ReplayFileError:
        raise
    except Exception as e:             # whatever a damaged zip or .npy raises
        raise ReplayFileError(f"the file cannot be read as a saved replay "
                              f"({type(e).__name__}: {e})") from e


class Archive:
    """The zip at ``source`` (a path or a binary file) opened for reading: ``names``,
    its members (``.npy`` dropped), and ``array(name, dtype, most)``."""

    def __init__(self, source):
        self._file = open(source, "rb") if isinstance(source, (str, os.PathLike)) else None
        try:
            self._zip, self._infos = _reading(self._open, self._file or source)
        except BaseException:
            self.close()
            raise
        self.names = set(self._infos)

    @staticmethod
    def _open(f):
        start = f.tell()
        length = f.seek(0, os.SEEK_END) - start
        f.seek(start)
        zf = zipfile.ZipFile(f)
        infos = {}
        for info in zf.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else None
            if name is None or name in infos:
                raise ReplayFileError(f"the file holds {info.filename!r}, which a saved replay "
                                      "does not (or holds it twice)")
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > length:
                raise ReplayFileError(f"member {info.filename!r} is compressed or larger than "
                                      "the file (a saved replay's members are stored as they "
                                      "are)")
            infos[name] = info
        return zf, infos

    def array(self, name, dtype, most=None):
        """Member ``name``: a 1-D array of ``dtype`` (of at most ``most`` values)."""
        return _reading(self._array, self._infos[name], np.dtype(dtype), most, name)

    def _array(self, info, dtype, most, name):
        with self._zip.open(info) as fp:
            version = np.lib.format.read_magic(fp)
            if version not in _HEADERS:
                raise ReplayFileError(f"member {name!r} is in .npy format {version}, not 1.0 "
                                      "or 2.0")
            shape, _, got = _HEADERS[version](fp)
            count = shape[0] if len(shape) == 1 else -1
            if got != dtype or count < 0:
                raise ReplayFileError(f"member {name!r} is a {got} array of shape {shape}, not "
                                      f"the 1-D {dtype} array a saved replay holds there")
            if most is not None and count > most:
                raise ReplayFileError(f"member {name!r} holds {count} values; a saved "
                                      f"replay's holds at most {most}")
            if fp.tell() + count * got.itemsize != info.file_size:
                raise ReplayFileError(f"member {name!r} declares {count} values, which is not "
                                      "what it holds")
        with self._zip.open(info) as fp:
            return np.lib.format.read_array(fp, allow_pickle=False)

    def close(self):
        if getattr(self, "_zip", None) is not None:
            self._zip.close()
        if self._file is not None:
            self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
