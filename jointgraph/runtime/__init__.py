"""Runtime: run compiled forward/backward graphs behind an autograd.Function."""
