"""The per-notebook harness: what a notebook measures its kernels with and shows (tables, recordings, ladders
timed a step at a time, profiler and Nsight Compute readings, memory measurements), apart from the kernels
themselves, which live in :mod:`gpu_course.kernels` with their thin wrappers.

* :mod:`.softmax`: notebook 06's sweep of the fused softmax over row lengths
* :mod:`.attention`: notebook 11 (FlashAttention in Triton) and ``bench/flash_attention*.py``
* :mod:`.layernorm`: notebook 10 (LayerNorm and GeLU as autograd functions and custom ops) and ``bench/layernorm.py``
* :mod:`.tensor_cores`: notebook 12 (the fp16 tensor-core ladder) and ``bench/tensor_cores*.py``
"""
