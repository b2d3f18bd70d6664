"""Reports of a Plan: the HTML page, the memory-timeline plot and the graph drawings."""

from .html import saved_rows, write_plan_html
from .timeline import plot_timeline

__all__ = ["plot_timeline", "saved_rows", "write_plan_html"]
