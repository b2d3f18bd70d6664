"""Graph passes: each a pure graph -> graph function. The ordered list is in pipeline.py."""
