"""Run the notebooks in ``notebooks/``.

``python -m tools.notebooks`` executes each one (in memory, from the notebooks folder,
with this checkout's tapegrad) and fails on the first error; ``--write`` saves them with
their new outputs, which is how the committed outputs are made.  The test suite runs
the same ``execute``.
"""
import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def execute(path, timeout=300, pythonpath=()):
    """The notebook at ``path`` executed (raises ``CellExecutionError`` on an error);
    ``pythonpath``: folders its kernel imports from first."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*map(str, pythonpath), str(ROOT),
                                                    env.get("PYTHONPATH")) if p)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(Path(path).parent)}})
    client.execute(env=env)
    return nb


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook file names (default: all)")
    parser.add_argument("--write", action="store_true", help="save the outputs")
    args = parser.parse_args(argv)
    import nbformat
    for path in NOTEBOOKS:
        if args.names and path.name not in args.names:
            continue
        nb = execute(path)
        if args.write:
            nbformat.write(nb, path)
        print(f"{path.name}: ok" + (" (written)" if args.write else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
