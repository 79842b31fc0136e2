"""Import: a built library loaded as a module of its own (a fresh import even under a name seen
before), with its symbols kept local to it (RTLD_LOCAL), and an undefined symbol told apart: the
learner's (declared in cpp_src, defined nowhere) or the split's."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import CudaBuildError
from .units import NeedsClassicBuild


def load_module(name: str, path: Path, funcs=()):
    """Import an extension module from a file (a fresh import even if the name was seen before).
    An undefined symbol that is one of ``funcs`` is the learner's (declared in cpp_src, defined
    nowhere): :class:`CudaBuildError`; any other is the split's: :class:`NeedsClassicBuild`."""
    spec = importlib.util.spec_from_file_location(name, path)
    flags = sys.getdlopenflags()
    try:
        # RTLD_LOCAL (the default, unless something changed it): the builds of a session define the same
        # symbols, and one placed in the global scope would stand in for a later build's own
        sys.setdlopenflags(flags & ~os.RTLD_GLOBAL)
        mod = importlib.util.module_from_spec(spec)  # dlopen: undefined symbols surface here
        spec.loader.exec_module(mod)
    except ImportError as e:
        m = re.search(r"undefined symbol: (\S+)", str(e))
        if not m:
            raise
        sym = m.group(1)
        try:
            sym = subprocess.run(["c++filt", sym], capture_output=True, text=True,
                                 timeout=10).stdout.strip() or sym
        except (OSError, subprocess.SubprocessError):
            pass
        if sym.split("(")[0].split("::")[-1] not in funcs:
            raise NeedsClassicBuild(f"the linked units leave {sym} undefined") from None
        raise CudaBuildError(f"load_cuda: {sym} is declared (in cpp_src) but defined nowhere "
                             f"in cuda_src: define it, or fix its name or parameter types "
                             f"so that they match the declaration") from None
    finally:
        sys.setdlopenflags(flags)
    return mod
