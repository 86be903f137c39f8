"""A small Triton kernel for the triton probe (Triton reads a kernel's source from its file, so it lives in
a module of its own). Imported only when triton is installed, inside the child process."""

import triton
import triton.language as tl


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # n is not a multiple of BLOCK on purpose: the tail must be masked right
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scale + y, mask=mask)


def scaled_add(x, y, scale: float):
    import torch

    out = torch.full_like(x, float("nan"))  # poisoned: an element the kernel skips stays NaN
    n = x.numel()
    block = 1024
    scaled_add_kernel[(triton.cdiv(n, block),)](x, y, out, n, scale, BLOCK=block)
    return out
