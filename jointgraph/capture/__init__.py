"""Capture: flatten the user's call, fake-ify inputs, trace forward+backward into a JointGraph."""
