"""Aux-coefficient schedules."""

from __future__ import annotations

import pytest

from moe_balance import FineTuneDecay, LinearWarmup, ThreePhase


def test_linear_warmup_from_zero_to_target():
    schedule = LinearWarmup(target=1e-2, warmup_steps=2000)
    assert schedule(0) == 0.0
    assert schedule(1000) == pytest.approx(5e-3)
    assert schedule(2000) == schedule(50_000) == 1e-2


def test_three_phase_plan():
    schedule = ThreePhase(total_steps=10_000, initial=1e-1, target=1e-2, final=1e-4, initial_steps=500)
    assert schedule(0) == schedule(499) == 1e-1
    assert schedule(500) == schedule(9_899) == 1e-2
    assert schedule.final_start == 9_900  # the last 1 %
    assert all(schedule(step) <= 1e-3 for step in range(9_900, 10_000))


def test_three_phase_refuses_a_final_value_above_1e_3():
    with pytest.raises(ValueError, match="final=0.01 must be <= 1e-3"):
        ThreePhase(total_steps=100, final=1e-2, initial_steps=10)


def test_three_phase_refuses_overlapping_phases():
    with pytest.raises(ValueError, match="initial_steps=100 runs into the final phase"):
        ThreePhase(total_steps=100, initial_steps=100)


def test_fine_tune_decay_halves_and_stops_at_the_floor():
    schedule = FineTuneDecay(start=1e-2, half_life_steps=100, floor=1e-3)
    assert schedule(0) == 1e-2
    assert schedule(100) == pytest.approx(5e-3)
    assert schedule(10_000) == 1e-3


@pytest.mark.parametrize("step", [-1, 1.5, True])
def test_bad_step_is_refused(step):
    with pytest.raises(ValueError, match="step="):
        LinearWarmup()(step)
