"""On PYTHONPATH, makes Triton unimportable in every Python started with it (a notebook's kernel included),
as on macOS or Windows, where Triton has no wheels: ``import triton`` raises ModuleNotFoundError."""
import sys

sys.modules["triton"] = None
