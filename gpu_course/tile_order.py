"""The grouped order in which notebook 07's matmul (and notebook 15's FP8 matmul) take their tiles: program ``pid``
of a 1D grid computes tile ``(pid_m, pid_n)`` of ``out``, walking ``GROUP_M`` tile rows column by column, so that
the programs running together share strips of ``a`` and of ``b`` in the L2 cache.

:func:`tile_of` is plain Python: notebook 07 runs it on integers to print the order (on any machine, Triton or
not), and the kernels call it compiled, as ``triton.jit(tile_of)`` (``triton_matmul.tile_of_jit``): one
definition for both, so the order printed is the order run.

>>> [tile_of(pid, 3, 2, GROUP_M=2) for pid in range(6)]
[(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
"""
try:   # Triton's interpreter (cpu mode) runs a jit'd function only where triton.language is among its globals
    import triton.language as tl  # noqa: F401
except ImportError:   # no Triton (macOS, Windows): tile_of is plain Python only
    pass


def tile_of(pid, tiles_m, tiles_n, GROUP_M):
    """The tile ``(pid_m, pid_n)`` that program ``pid`` computes, of ``tiles_m x tiles_n`` tiles."""
    in_group = GROUP_M * tiles_n                       # programs per group of GROUP_M tile rows
    first_m = (pid // in_group) * GROUP_M              # the group's first tile row
    group_m = min(tiles_m - first_m, GROUP_M)          # the last group may be shorter
    pid_m = first_m + (pid % in_group) % group_m       # down the group's rows first...
    pid_n = (pid % in_group) // group_m                # ...then the next column
    return pid_m, pid_n
