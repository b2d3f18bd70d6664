"""Provisional: replaced by the min-cut partitioner."""

from .default import plan_default as plan_mincut  # noqa: F401
