#ifndef GPU_COURSE_IMAGE_BLUR_CU
#define GPU_COURSE_IMAGE_BLUR_CU
#include "../common.cuh"
// Box blur (notebook 09) of an h x w grey image: each pixel becomes the mean of the
// (2*radius+1)^2 pixels around it that lie inside the image. One thread per pixel on a 2-D grid.
__global__ void blur_k(const unsigned char* __restrict__ in, unsigned char* __restrict__ out,
                       int h, int w, int radius) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= h || c >= w) return;
    int sum = 0, count = 0;
    for (int rr = max(r - radius, 0); rr <= min(r + radius, h - 1); rr++)
        for (int cc = max(c - radius, 0); cc <= min(c + radius, w - 1); cc++) {
            sum += in[rr * w + cc];
            count++;
        }
    out[r * w + c] = static_cast<unsigned char>(sum / count);
}

void blur(torch::Tensor grey, torch::Tensor out, int64_t radius) {
    CHECK_INPUT(grey); CHECK_INPUT(out);
    TORCH_CHECK(grey.scalar_type() == torch::kByte && grey.dim() == 2, "blur: grey must be an h x w uint8 image");
    TORCH_CHECK(out.scalar_type() == torch::kByte && out.sizes() == grey.sizes(), "blur: out must be like grey");
    TORCH_CHECK(radius >= 0 && radius <= 64, ("blur: radius must be 0..64, got " + std::to_string(radius)).c_str());
    int h = grey.size(0), w = grey.size(1);
    dim3 tpb(16, 16), blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    blur_k<<<blocks, tpb, 0, at::cuda::getCurrentCUDAStream()>>>(
            grey.data_ptr<unsigned char>(), out.data_ptr<unsigned char>(), h, w, radius);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_IMAGE_BLUR_CU
