"""Where train.reload's save goes: a random-init LLaMA (1.1B shape by default, fp32, on the GPU) saved by
save_pretrained to memory (/dev/shm) and to the temporary folder, beside its parts measured in the same run: the
copy of every tensor to the host, and safetensors' save_file of the host copies.

    python benchmarks/bench_save_parts.py [--layers 22] [--hidden 2048]

Prints one line per part as it ends (seconds and GB/s over the weights' bytes).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=22)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--intermediate", type=int, default=5632)
    args = ap.parse_args()
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"
    cfg = LlamaConfig(hidden_size=args.hidden, intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                      num_attention_heads=max(1, args.hidden // 64), num_key_value_heads=max(1, args.hidden // 256),
                      vocab_size=32000)
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    gb = nbytes / 1e9
    print(f"{device}: {sum(p.numel() for p in model.parameters()) / 1e6:,.0f}M parameters, {gb:.2f} GB fp32",
          flush=True)

    def part(label: str, fn) -> None:
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        s = time.perf_counter() - t0
        print(f"{label:<48} {s:7.2f} s  {gb / s:6.2f} GB/s", flush=True)

    host: dict[str, torch.Tensor] = {}
    part("every tensor to the host (.cpu())", lambda: host.update({k: v.cpu() for k, v in model.state_dict().items()
                                                                  if k != "lm_head.weight"}))
    if device == "cuda":
        pinned: dict[str, torch.Tensor] = {}
        part("every tensor to pinned host memory", lambda: pinned.update(
            {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True).copy_(v, non_blocking=True)
             for k, v in model.state_dict().items() if k != "lm_head.weight"}))
    for where in ("/dev/shm", tempfile.gettempdir()):
        if not Path(where).is_dir():
            continue
        folder = Path(tempfile.mkdtemp(prefix="rocmcheck-save-", dir=where))
        try:
            part(f"safetensors save_file of the host copies, {where}",
                 lambda: save_file(host, str(folder / "host.safetensors")))
            (folder / "host.safetensors").unlink()
            part(f"save_pretrained, {where}", lambda: model.save_pretrained(folder / "m", safe_serialization=True))
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
