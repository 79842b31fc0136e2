"""Notebook 15 (formats below bf16 and the kernels that use them): ``quantize`` (formats, scales, int4 packing,
test data), ``errors`` (error tables of matmuls in each format and granularity), ``measure`` (the FP8 GEMM and
the weight-only GEMV against torch's kernels, the batch sweep)."""
