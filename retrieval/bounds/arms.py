"""The budgets a search runs by: those in force, or a canary's for the share of readers in
its arm. A reader's arm is a stable hash of the canary and the reader, so a reader stays
in one arm for the canary's life and the arms are independent from one canary to the next."""

import hashlib
from dataclasses import dataclass
from typing import Literal

Arm = Literal["none", "control", "canary"]


@dataclass(frozen=True)
class CanaryBudgets:
    id: int
    vector_budget_ms: float
    deadline_ms: float
    share: float  # of readers


@dataclass(frozen=True)
class InForce:
    vector_budget_ms: float
    deadline_ms: float
    canary: CanaryBudgets | None


def arm_of(canary: CanaryBudgets, reader: str) -> Arm:
    """`canary` for `share` of readers by a hash of the two, uniform in [0, 1)."""
    digest = hashlib.sha256(f"{canary.id}:{reader}".encode()).digest()
    return "canary" if int.from_bytes(digest[:8], "big") / 2**64 < canary.share else "control"


def budgets_for(in_force: InForce, reader: str) -> tuple[Arm, float, float]:
    """The reader's arm and its (vector budget, deadline) in ms."""
    canary = in_force.canary
    if canary is None:
        return "none", in_force.vector_budget_ms, in_force.deadline_ms
    if arm_of(canary, reader) == "canary":
        return "canary", canary.vector_budget_ms, canary.deadline_ms
    return "control", in_force.vector_budget_ms, in_force.deadline_ms
