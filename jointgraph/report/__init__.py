"""Reports of a Plan: the HTML page, the memory-timeline plot, the graph drawings and the explain rows."""

from .explain import ExplainRow, Explanation, explain
from .html import write_plan_html
from .timeline import plot_timeline

__all__ = ["ExplainRow", "Explanation", "explain", "plot_timeline", "write_plan_html"]
