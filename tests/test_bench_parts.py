"""The comparison suite's parts, in process: the check, size limits, missing frameworks,
the FAW reference against PyTorch, plots and the markdown report."""
import numpy as np
import pytest
import torch

from bench import harness, report
from bench.frameworks import Missing
from bench.harness import Config, Impl, Plan, check, run_case
from bench.workloads import faw, replay, scalar_chain


def test_check_names_what_disagrees_and_with_whom():
    ref, tg = (1.0, np.array([1.0, 2.0])), (1.0, np.array([1.0, 2.0]))
    assert check((1.0, np.array([1.0, 2.0])), ref, tg, 1e-8)[1:] == ("ok", "")
    err, status, msg = check((1.5, np.array([1.0, 2.0])), ref, tg, 1e-8)
    assert status == "WRONG VALUE" and err == pytest.approx(0.5)
    assert "value differs from reference" in msg and "value differs from tapegrad's" in msg
    # a reference without a gradient: tapegrad's gradient still checks it
    status, msg = check((1.0, np.array([1.0, 2.1])), (1.0, None), tg, 1e-8)[1:]
    assert status == "WRONG GRADIENT" and msg.startswith("gradient differs from tapegrad's")
    assert check((1.0, np.array([np.nan, 2.0])), ref, None, 1e-8)[1] == "WRONG GRADIENT"
    with pytest.raises(ValueError, match="shape"):
        check((1.0, np.zeros(3)), ref, None, 1e-8)


class FakeWorkload:
    """A workload whose 'broken' framework returns a wrong gradient."""
    NAME, LIMITS = "fake", {"slow": (10, "too slow")}

    @staticmethod
    def build(fw, cfg):
        if fw == "absent":
            raise Missing("No module named 'absent'")
        grad = np.array([3.0]) if fw == "broken" else np.array([2.0])
        return Impl(lambda: (1.0, grad), prep_s=0.25)

    @staticmethod
    def ops(fw, cfg):
        return 4


@pytest.mark.parametrize("fw, status", [("fine", "ok"), ("broken", "WRONG GRADIENT"),
                                        ("absent", "missing"), ("slow", "skipped")])
def test_run_case_statuses(fw, status):
    cfg = Config("x=20", 20)
    row, out = run_case(FakeWorkload, fw, cfg, Plan(repeats=3), (1.0, np.array([2.0])))
    assert row["status"] == status, row
    if status == "ok":
        assert row["repeats"] == 3 and row["prep_s"] == 0.25 and row["ops"] == 4
        assert out[1].tolist() == [2.0] and row["ns_per_op"] > 0
    else:
        assert out is None and row["median_s"] is None and row["message"]
    assert report.exit_code([row]) == (2 if status == "WRONG GRADIENT" else 0)


def test_limits_can_be_lifted():
    plan = Plan(repeats=1, limits=False)
    row, _ = run_case(FakeWorkload, "slow", Config("x=20", 20), plan, (1.0, np.array([2.0])))
    assert row["status"] == "ok"


def test_ratios_are_taken_within_one_size():
    rows = [harness.new_row(FakeWorkload, fw, Config(f"x={x}", x), median_s=t)
            for fw, x, t in [("torch", 1, 2.0), ("tapegrad", 1, 1.0), ("torch", 2, 8.0),
                             ("numba", 2, 2.0)]]
    harness.add_ratios(rows)
    assert [r["vs_torch"] for r in rows] == [1.0, 0.5, 1.0, 0.25]
    assert [r["vs_tapegrad"] for r in rows] == [2.0, 1.0, None, None]


@pytest.mark.parametrize("wl, size", [(faw, 12), (replay, 6)])
@pytest.mark.parametrize("fw", ["tapegrad-replay", "tapegrad-compiled"])
def test_replay_rows_use_trace(wl, size, fw):
    cfg, = wl.configs(size, quick=True)
    row, _ = run_case(wl, fw, cfg, Plan(repeats=1), wl.reference(cfg))
    assert row["status"] == "ok", row
    assert row["prep_s"] >= 0 and row["max_rel_err"] < 1e-8


def _faw_torch(x0, n_ops):
    class NS:
        softplus = staticmethod(torch.nn.functional.softplus)

        @staticmethod
        def softmax4(xs):
            return torch.softmax(torch.stack(xs), 0).unbind()

    x = torch.tensor(x0, requires_grad=True)
    y = faw.graph(NS, list(x.unbind()), n_ops)
    y.backward()
    return y.item(), x.grad.numpy()


@pytest.mark.parametrize("n_ops", [4, 41, 200])
def test_faw_reference_matches_torch(n_ops):
    x0 = np.random.RandomState(n_ops).uniform(-2, 2, faw.N_INPUTS)
    value, grad = faw.value_and_grad(x0, n_ops)
    t_value, t_grad = _faw_torch(x0, n_ops)
    assert value == pytest.approx(t_value, rel=1e-12)
    assert np.abs(t_grad).max() > 0
    np.testing.assert_allclose(grad, t_grad, rtol=1e-9, atol=1e-12 * np.abs(t_grad).max())


def test_rosen_hand_gradient_matches_reference():
    points = np.random.RandomState(0).uniform(-2, 2, (3, 8))
    f, g = scalar_chain.rosen_value_and_grad(points)
    for p, fp, gp in zip(points, f, g):
        rf, rg = scalar_chain.rosen_numpy(p)
        assert fp == pytest.approx(rf) and np.allclose(gp, rg)


def _rows():
    rows = []
    for wl, xs in (("scalar_chain", (10, 100)), ("first_gradient", ("cold", "warm"))):
        for x in xs:
            for fw, scale in (("tapegrad", 1.0), ("torch", 5.0), ("numba", 0.01)):
                numeric = not isinstance(x, str)
                cfg = Config(f"n={x}" if numeric else x, x if numeric else None)
                wlmod = type("W", (), {"NAME": wl})
                rows.append(harness.new_row(wlmod, fw, cfg, median_s=scale * (x if numeric else 1) * 1e-5,
                                            min_s=1e-6, max_s=1.0, repeats=3))
    harness.add_ratios(rows)
    return rows


def test_plots_are_small_pngs(tmp_path):
    pytest.importorskip("matplotlib")   # optional (the bench extra), absent from the test extra
    from bench import plots
    workloads = [type("W", (), {"NAME": n, "XLABEL": x})
                 for n, x in (("scalar_chain", "n"), ("first_gradient", None))]
    paths = plots.write_plots(_rows(), workloads, tmp_path)
    assert [p.name for p in paths] == ["scalar_chain.png", "first_gradient.png"]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) < 150_000


def test_markdown_report_has_every_row_and_its_plot(tmp_path):
    info = {"cpu": "test cpu", "physical_cores": 1, "logical_cores": 2, "usable_cores": 2,
            "platform": "p", "python": "3", "versions": {"numpy": "2"}, "numpy_blas": {},
            "blas_threads_setting": 1, "torch_threads": {"torch": 1},
            "openblas_env_unset_in_process": {"OPENBLAS_CORETYPE": None}, "git": "abc",
            "timestamp": "t", "argv": ["--quick"]}
    md = tmp_path / "R.md"
    report.write_markdown(md, _rows(), info, [tmp_path / "figs" / "scalar_chain.png"])
    text = md.read_text()
    assert text.count("| n=10 |") == 3 and text.count("| cold |") == 3
    assert "![scalar_chain](figs/scalar_chain.png)" in text and "test cpu" in text
    assert "| numba | hand-written gradient" in text


def test_breakdown_array_ops_are_the_same_ops_in_both_libraries(capsys):
    """``python -m bench.breakdown --arrays``: each timed op gives PyTorch's value (the
    rows compare like with like), and the table has a row per op and length."""
    import tapegrad as tg
    from bench import breakdown
    rng = np.random.RandomState(1)
    vals = [rng.rand(20), rng.rand(20), rng.rand(10), rng.rand(10, 10)]
    for name, op in breakdown.ARRAY_OPS.items():
        got = [op(m, *(m.tensor(v, requires_grad=True) for v in vals)) for m in (tg, torch)]
        np.testing.assert_allclose(got[0].detach().numpy(), got[1].detach().numpy(),
                                   rtol=1e-12, err_msg=name)
    breakdown.main(["--arrays", "20", "--repeats", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()]
    assert len(rows) == len(breakdown.ARRAY_OPS)
    assert all(float(r.split()[-2]) > 0 and float(r.split()[-1]) > 0 for r in rows)
