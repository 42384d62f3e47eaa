"""examples/train_spirals.py trains its MLP to the accuracy it states."""
import importlib.util
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "train_spirals.py")


def _accuracy(text):
    found = re.findall(r"train accuracy: ([\d.]+)% \(target (\d+)%\)", text)
    assert len(found) == 1, text[-2000:]
    return float(found[0][0]), float(found[0][1])


def test_default_run_reaches_the_stated_accuracy():
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    accuracy, target = _accuracy(proc.stdout)
    assert target == 98 and accuracy >= target


def test_short_run_without_tqdm_prints_the_loss(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)        # import tqdm -> ImportError
    spec = importlib.util.spec_from_file_location("train_spirals", SCRIPT)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    returned = example.main(["--steps", "300", "--seed", "1"])
    out = capsys.readouterr().out
    losses = [float(v) for v in re.findall(r"step +\d+  loss ([\d.]+)", out)]
    assert len(losses) == 11 and losses[-1] < losses[0] / 10
    accuracy, target = _accuracy(out)
    assert accuracy >= target and abs(returned * 100 - accuracy) < 0.05
