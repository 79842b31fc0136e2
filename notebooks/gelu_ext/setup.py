"""Build the GeLU extension of notebook 03 the standard way.

    python setup.py build_ext --build-lib <dir> --build-temp <dir>

(the notebook builds into a temporary directory, so nothing lands in the repository).
The kernel file is gelu_kernel.cu, not gelu.cu: BuildExtension names each object after its source's
base name, so gelu.cpp and gelu.cu would both become gelu.o and ninja refuses the build.
"""
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

setup(
    name="gelu_ext",
    ext_modules=[CUDAExtension("gelu_ext", ["gelu.cpp", "gelu_kernel.cu"],
                               extra_compile_args={"cxx": ["-O2"], "nvcc": ["-O3"]})],
    cmdclass={"build_ext": BuildExtension},
)
