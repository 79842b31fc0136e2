"""What every notebook imports first: the course's helpers under one short name.

``import utils`` chooses the execution mode (gpu or cpu) before numba or triton is imported, and
gives the helpers of the lectures their usual names (``utils.load_cuda``, ``utils.cdiv``,
``from utils import cuda_begin, load_cuda, get_sig``). The helpers themselves live in the
``gpu_course`` package, one module per job: see ``help(gpu_course)`` and the README's
Architecture section.

>>> import utils
>>> utils.cdiv(10, 4), utils.dim3(16, 16)
(3, dim3(x=16, y=16, z=1))
"""
from gpu_course import *  # noqa: F401,F403  (the public names, listed in gpu_course.__all__)
from gpu_course import __all__  # noqa: F401
