"""Typed roles of graph inputs and outputs.

Every placeholder carries ``node.meta["role"]``; the output node carries
``node.meta["roles"]``, one role per returned value. Passes classify nodes by
these roles, never by names.
"""

from __future__ import annotations

import enum


class Role(enum.Enum):
    """What a graph input or output is, in the user's terms."""

    # inputs
    PRIMAL = "primal"              # a tensor argument of the user's function
    PARAMETER = "parameter"        # an nn.Parameter of the compiled module
    BUFFER = "buffer"              # a registered buffer of the compiled module
    CAPTURED = "captured"          # a tensor read from a closure, global or module (Note [Captured tensors])
    SIZE = "size"                  # a symbolic size passed as an int (Dynamo graphs)
    NEW_LEAF = "new_leaf"          # a leaf the function creates, made by the runtime per call (Note [New leaves])
    TANGENT = "tangent"            # incoming gradient of a differentiable output
    # outputs
    USER_OUTPUT = "user_output"    # a tensor the user's function returned
    MUTATED_INPUT = "mutated_input"  # the new value of an input the function mutated
    GRADIENT = "gradient"          # gradient of a primal / parameter
    BACKWARD_MUTATION = "backward_mutation"  # new value of an input the backward mutated
    # forward outputs consumed by the backward (after the split)
    SAVED_TENSOR = "saved_tensor"
    SAVED_SIZE = "saved_size"

    @property
    def is_input_value(self) -> bool:
        return self in (Role.PRIMAL, Role.PARAMETER, Role.BUFFER, Role.CAPTURED, Role.SIZE, Role.NEW_LEAF)


class Decision(enum.Enum):
    """How a forward value the backward needs reaches the backward."""

    SAVE = "save"
    RECOMPUTE = "recompute"
    OFFLOAD = "offload"
    COMPRESS = "compress"
