"""Schedules for the aux-loss coefficient (alpha): a plain function of the step, no state.

- ``LinearWarmup``: 0 -> ``target`` linearly over ``warmup_steps``, then ``target`` (e.g. 0 -> 1e-2 over 2000 steps),
  so an untrained router is not forced towards uniform before it has learned anything.
- ``ThreePhase``: ``initial`` (large) for the first ``initial_steps``, ``target`` in the middle, ``final`` (<= 1e-3)
  for the last ``final_fraction`` of training (1 % by default), when balance is settled and quality matters most.
- ``FineTuneDecay``: from ``start`` halving every ``half_life_steps`` down to ``floor`` when fine-tuning a balanced
  model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _check_step(step: int) -> None:
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step={step!r} must be a non-negative int")


@dataclass(frozen=True)
class LinearWarmup:
    target: float = 1e-2
    warmup_steps: int = 2000

    def __post_init__(self) -> None:
        if self.warmup_steps < 0 or self.target < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps} and target={self.target} must be >= 0")

    def __call__(self, step: int) -> float:
        _check_step(step)
        if step >= self.warmup_steps:
            return self.target
        return self.target * step / self.warmup_steps


@dataclass(frozen=True)
class ThreePhase:
    total_steps: int
    initial: float = 1e-1
    target: float = 1e-2
    final: float = 1e-4
    initial_steps: int = 1000
    final_fraction: float = 0.01

    def __post_init__(self) -> None:
        if self.total_steps < 1:
            raise ValueError(f"total_steps={self.total_steps} must be >= 1")
        if not 0 < self.final_fraction < 1:
            raise ValueError(
                f"final_fraction={self.final_fraction} must be between 0 and 1, e.g. 0.01 for the last 1 %"
            )
        if self.final > 1e-3:
            raise ValueError(f"final={self.final} must be <= 1e-3: the last phase lets the router settle")
        if not self.initial >= self.target >= self.final >= 0:
            raise ValueError(f"initial={self.initial} >= target={self.target} >= final={self.final} >= 0 must hold")
        if self.initial_steps > self.final_start:
            raise ValueError(
                f"initial_steps={self.initial_steps} runs into the final phase starting at step {self.final_start}"
            )

    @property
    def final_start(self) -> int:
        """First step of the final phase: the last ``final_fraction`` of ``total_steps`` (at least one step)."""
        return self.total_steps - max(1, math.ceil(self.total_steps * self.final_fraction))

    def __call__(self, step: int) -> float:
        _check_step(step)
        if step < self.initial_steps:
            return self.initial
        if step < self.final_start:
            return self.target
        return self.final


@dataclass(frozen=True)
class FineTuneDecay:
    start: float = 1e-2
    half_life_steps: int = 500
    floor: float = 1e-4

    def __post_init__(self) -> None:
        if self.half_life_steps < 1 or not self.start >= self.floor >= 0:
            raise ValueError(
                f"half_life_steps={self.half_life_steps} must be >= 1 and start={self.start} >= floor={self.floor} >= 0"
            )

    def __call__(self, step: int) -> float:
        _check_step(step)
        return max(self.floor, self.start * 0.5 ** (step / self.half_life_steps))
