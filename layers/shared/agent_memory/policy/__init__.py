"""Pure decisions: no I/O, exhaustively unit-tested."""

# The auto-save policy's presets (``policy.autosave``), here so that a setting naming one is checked without
# importing the policy code (every function's settings check AUTOSAVE_POLICY; most never apply a policy).
PRESETS = ("default", "all", "custom")
