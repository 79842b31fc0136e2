// The Python binding: checks the input, then calls the CUDA function defined in gelu_kernel.cu.
#include <torch/extension.h>

torch::Tensor gelu_cuda(torch::Tensor x);  // defined in gelu_kernel.cu

torch::Tensor gelu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor (on the GPU)");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous: call .contiguous() on it first");
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "x must be float32");
    return gelu_cuda(x);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("gelu", &gelu, "GeLU (tanh approximation), one float per thread");
}
