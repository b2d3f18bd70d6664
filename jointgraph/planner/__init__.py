"""Planning: choose a Decision for each forward value the backward needs."""
