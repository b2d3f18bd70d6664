"""The IR: roles, dataclasses and invariant checks shared by every stage."""

from . import hook_ops, rng  # noqa: F401  (register the hook op and the RNG effect ops)
from .graph import NO_RESHARDING, InputInfo, JointGraph, OutputInfo, Plan, Resharding, SavedValue
from .roles import Decision, Role
from .verify import verify

__all__ = ["NO_RESHARDING", "Decision", "InputInfo", "JointGraph", "OutputInfo", "Plan", "Resharding", "Role",
           "SavedValue", "verify"]
