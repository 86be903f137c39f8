"""One fresh process that starts as a GPU smoke-train does, with one warm-up variant in a thread beside its imports
and load, then times the parts a kernel's first use slows; bench_step_parts.py --only warmup runs it:

    python benchmarks/warmup_variants_child.py MODE REPO MODEL_DIR

MODE: none, context (the CUDA context only), attention (train/attention_warmup.py, what the run does), layer (one
decoder layer's other kernels written out in torch's ops: embedding, RMS norm, rotary embedding, SiLU-gated MLP,
the loss, clipping, the fused AdamW kernel), both (attention and layer), all (both, then each projection's GEMMs at
the model's sizes and 4 and 16 rows). The layer and GEMM variants were measured on H200s on 2026-12-02 and not
kept in the run (benchmarks/RESULTS.md section 18). Prints one JSON line.
"""

import json
import sys
import threading
import time
from pathlib import Path

t0 = time.perf_counter()  # as a run's clock starts: before torch is imported
mode, repo, model_dir = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, repo)
import torch  # noqa: E402

from rocmcheck.train import attention_warmup as aw  # noqa: E402
from rocmcheck.train.config import ADAM_BETAS, ADAM_EPS, TrainConfig  # noqa: E402
from rocmcheck.train.run import NUMERICS_ROWS  # noqa: E402

config = json.loads((Path(model_dir) / "config.json").read_text())
cfg = TrainConfig(model=Path(model_dir))
seq = cfg.seq_len
shape = aw.attention_shape(config, seq)  # (heads, key/value heads, head size), or None: not plain causal attention
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
WARM_VALUE, WARM_DTYPE, WARM_BATCH, IGNORE_INDEX = aw.WARM_VALUE, aw.WARM_DTYPE, aw.WARM_BATCH, -100


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize()


def warm_layer(device: torch.device, sizes: tuple[int, int, int], seq_len: int) -> None:
    # One decoder layer's kernels besides the attention, as transformers' LLaMA-family modeling computes them under
    # bf16 autocast over fp32 weights, forward and backward, then clipping and a fused AdamW step.
    F = torch.nn.functional
    hidden, intermediate, vocab = sizes
    ids = torch.arange(WARM_BATCH * seq_len, device=device).remainder(vocab).view(WARM_BATCH, seq_len)
    labels = F.pad(ids, (0, 1), value=IGNORE_INDEX)[..., 1:]  # the loss's shift, the last position ignored

    def weight(*shape: int) -> torch.Tensor:
        return torch.full(shape, WARM_VALUE, device=device, requires_grad=True)

    embed, norm, query, gate_up, down, head = (weight(vocab, hidden), weight(hidden), weight(hidden, hidden),
                                               weight(2 * intermediate, hidden), weight(hidden, intermediate),
                                               weight(vocab, hidden))
    with torch.autocast(device.type, dtype=WARM_DTYPE):
        x = F.embedding(ids, embed)
        normed = norm * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)
        # the rotary embedding: fp32 angles, their cosine and sine in bf16, applied to a bf16 projection by halves
        positions = torch.arange(seq_len, device=device, dtype=torch.float32)
        angles = positions[:, None] * torch.full((hidden // 2,), WARM_VALUE, device=device)[None, :]
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(WARM_DTYPE), angles.sin().to(WARM_DTYPE)
        q = F.linear(normed, query)
        rotated = q * cos + torch.cat((-q[..., hidden // 2:], q[..., :hidden // 2]), dim=-1) * sin
        gate, up = F.linear(normed + rotated, gate_up).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, down)
        logits = F.linear(x, head).float()
        loss = F.cross_entropy(logits.view(-1, vocab), labels.reshape(-1), ignore_index=IGNORE_INDEX)
    loss.backward()
    params = [embed, norm, query, gate_up, down, head]
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    # the fused AdamW kernel itself: torch.optim's first step imports torch._dynamo, which the main thread may
    # be importing meanwhile (two threads in one package's imports can deadlock)
    grads = [p.grad for p in params]
    moments, squares = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    steps = [torch.ones((), device=device) for _ in params]
    with torch.no_grad():
        torch._fused_adamw_(params, grads, moments, squares, [], steps, lr=cfg.lr, beta1=ADAM_BETAS[0],
                            beta2=ADAM_BETAS[1], weight_decay=0.0, eps=ADAM_EPS, amsgrad=False, maximize=False)


def linear_shapes(config):
    # (in, out) of the query, key/value, output, gate/up, down and head projections, each once
    heads, kv_heads, head_dim = shape
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    return list(dict.fromkeys([(hidden, heads * head_dim), (hidden, kv_heads * head_dim), (heads * head_dim, hidden),
                               (hidden, inter), (inter, hidden), (hidden, vocab)]))


def warm_gemms(device, shapes, seq_len, rows):
    # each projection's GEMMs (bf16, forward and both gradients) at the model's sizes and these row counts
    for n_rows in dict.fromkeys(rows):
        for fan_in, fan_out in shapes:
            x = torch.full((n_rows * seq_len, fan_in), WARM_VALUE, device=device, dtype=WARM_DTYPE, requires_grad=True)
            w = torch.full((fan_out, fan_in), WARM_VALUE, device=device, dtype=WARM_DTYPE, requires_grad=True)
            torch.nn.functional.linear(x, w).sum().backward()


took = {}


def warm():
    t = time.perf_counter()
    if mode == "context":
        torch.zeros(1, device=device)
    if mode in ("attention", "both", "all") and shape:
        aw.warm_attention(device, shape, seq)
    if mode in ("layer", "both", "all"):
        warm_layer(device, (min(config["hidden_size"], 512), min(config["intermediate_size"], 1024),
                            min(config["vocab_size"], 2048)), seq)
    if mode == "all" and shape:
        warm_gemms(device, linear_shapes(config), seq, (NUMERICS_ROWS, cfg.micro_batch))
    sync()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    took["warm"] = time.perf_counter() - t


thread = threading.Thread(target=warm) if mode != "none" else None
if thread:
    thread.start()
t_started = time.perf_counter()
from rocmcheck.train import modeling, numerics, task
from rocmcheck.train.distributed import World
from rocmcheck.train.plain_strategy import PlainStrategy

modeling.offline_and_quiet()
modeling.import_model_classes()
t_import = time.perf_counter()
tokenizer = modeling.load_tokenizer(Path(model_dir))
g = torch.Generator().manual_seed(0)
x = torch.randint(4, min(config["vocab_size"], 100), (cfg.micro_batch, seq), generator=g).to(device)
strategy = PlainStrategy(cfg, device, World(0, 1, 0))
model = strategy.build(lambda step, micro: (x, x))
sync()
t_load = time.perf_counter()
if thread:
    thread.join()
t_join = time.perf_counter()
found = numerics.measure(model, x[:NUMERICS_ROWS], x[:NUMERICS_ROWS], False)
steps = []
for i in range(5):
    t = time.perf_counter()
    strategy.train_step(i)
    sync()
    steps.append(time.perf_counter() - t)
t = time.perf_counter()
modeling.accuracy(model, tokenizer, task.eval_examples(64), device)
t_acc = time.perf_counter() - t
print(json.dumps({"mode": mode, "import_s": t_import - t0, "classes_s": t_import - t_started,
                  "load_s": t_load - t_import, "join_s": t_join - t_load,
                  "warm_s": took.get("warm"), "bf16_pass_s": found["bf16"]["seconds"],
                  "fp32_pass_s": found["fp32"]["seconds"], "steps_s": steps, "accuracy_s": t_acc,
                  "total_s": time.perf_counter() - t0}), flush=True)
