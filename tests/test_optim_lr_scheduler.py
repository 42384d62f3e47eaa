"""StepLR and CosineAnnealingLR against PyTorch: the lr sequence (exactly: the same
recursive formulas), get_last_lr, several groups, resuming, state dicts, and training
with a schedule."""
import warnings

import numpy as np
import pytest
import torch
from torch_twins import assert_same_training, train

import tapegrad

pytestmark = pytest.mark.usefixtures("torch_float64")

SCHEDULES = {
    "step": lambda m, opt: m.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
    "step-default-gamma": lambda m, opt: m.optim.lr_scheduler.StepLR(opt, 4),
    "cosine": lambda m, opt: m.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10),
    "cosine-eta-min-restart": lambda m, opt: m.optim.lr_scheduler.CosineAnnealingLR(
        opt, T_max=4, eta_min=0.01),
}


def _optimizer(m):
    a, b = m.zeros(2, requires_grad=True), m.zeros(3, requires_grad=True)
    return m.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1, momentum=0.9)


@pytest.mark.parametrize("name", SCHEDULES)
def test_lr_sequence_matches_torch(both, name):
    def program(m):
        opt = _optimizer(m)
        sched = SCHEDULES[name](m, opt)
        lrs = [sched.get_last_lr()]
        for _ in range(25):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        return lrs, [g["lr"] for g in opt.param_groups], [g["initial_lr"]
                                                          for g in opt.param_groups]
    a, b = both(program)
    assert a == b


@pytest.mark.parametrize("name", ["step", "cosine"])
def test_closed_form_with_an_epoch_argument(both, name):
    def program(m):
        sched = SCHEDULES[name](m, _optimizer(m))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = []
            for epoch in (7, 2, 12):
                sched.step(epoch)
                out.append(sched.get_last_lr())
        return out, [str(w.message) for w in caught]
    a, b = both(program)
    np.testing.assert_allclose(b[0], a[0], rtol=1e-15)
    assert b[1] == a[1] and len(a[1]) == 4   # "before optimizer.step()", 3 x "epoch"


def test_resuming_from_a_state_dict(both):
    def program(m):
        opt = _optimizer(m)
        sched = m.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8)
        for _ in range(3):
            opt.step()
            sched.step()
        saved_opt, saved_sched = opt.state_dict(), sched.state_dict()
        opt2 = _optimizer(m)
        opt2.load_state_dict(saved_opt)
        sched2 = m.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=8, last_epoch=2)
        sched2.load_state_dict(saved_sched)
        lrs = []
        for _ in range(6):
            opt2.step()
            sched2.step()
            lrs.append(sched2.get_last_lr())
        return lrs, sched2.last_epoch
    a, b = both(program)
    assert a == b


def test_errors_match_torch():
    for m in (torch, tapegrad):
        with pytest.raises(TypeError, match="list is not an Optimizer"):
            m.optim.lr_scheduler.StepLR([], 3)
        with pytest.raises(KeyError, match="param 'initial_lr' is not specified in "
                                           "param_groups\\[0\\] when resuming"):
            m.optim.lr_scheduler.StepLR(_optimizer(m), 3, last_epoch=4)


def test_training_with_a_schedule_matches_torch(both):
    def make(m, model):
        return m.optim.AdamW(model.parameters(), lr=0.05)
    runs = both(lambda m: train(m, make, scheduler=lambda m, opt:
                                m.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7)))
    assert_same_training(*runs)
    assert runs[0][2] == runs[1][2]
