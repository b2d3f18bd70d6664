"""The IR: roles, dataclasses and invariant checks shared by every stage."""

from . import rng  # noqa: F401  (registers the RNG effect ops: Note [Seeding inside the function])
from .graph import InputInfo, JointGraph, OutputInfo, Plan, SavedValue
from .roles import Decision, Role
from .verify import verify

__all__ = ["Decision", "InputInfo", "JointGraph", "OutputInfo", "Plan", "Role", "SavedValue", "verify"]
