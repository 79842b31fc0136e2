#ifndef GPU_COURSE_IMAGE_RGB_TO_GREY_CU
#define GPU_COURSE_IMAGE_RGB_TO_GREY_CU
#include "../common.cuh"
// RGB -> grey (notebook 09; the first kernel of lecture 3 of GPU MODE), on a 2-D grid: one
// thread per pixel, c from the x coordinates, r from the y ones. The image is h x w x 3 bytes,
// channels last, as an image file is read.
__global__ void rgb_to_grey_k(const unsigned char* __restrict__ rgb, unsigned char* __restrict__ grey,
                              int h, int w) {
    int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < h && c < w) {
        int i = r * w + c;
        grey[i] = static_cast<unsigned char>(0.2989f * rgb[3 * i] + 0.5870f * rgb[3 * i + 1] + 0.1140f * rgb[3 * i + 2]);
    }
}

void rgb_to_grey(torch::Tensor rgb, torch::Tensor grey) {
    CHECK_INPUT(rgb); CHECK_INPUT(grey);
    TORCH_CHECK(rgb.scalar_type() == torch::kByte && rgb.dim() == 3 && rgb.size(2) == 3,
                "rgb_to_grey: rgb must be an h x w x 3 uint8 image");
    int h = rgb.size(0), w = rgb.size(1);
    TORCH_CHECK(grey.scalar_type() == torch::kByte && grey.dim() == 2 && grey.size(0) == h && grey.size(1) == w,
                "rgb_to_grey: grey must be an h x w uint8 tensor");
    dim3 tpb(16, 16), blocks(cdiv(w, tpb.x), cdiv(h, tpb.y));
    rgb_to_grey_k<<<blocks, tpb, 0, at::cuda::getCurrentCUDAStream()>>>(
            rgb.data_ptr<unsigned char>(), grey.data_ptr<unsigned char>(), h, w);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
#endif  // GPU_COURSE_IMAGE_RGB_TO_GREY_CU
