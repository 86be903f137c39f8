#!/usr/bin/env bash
# One call on a lent NVIDIA machine runs the benchmark scripts in order; each writes into $OUT.
#   bash benchmarks/gpu_session.sh doctor probes collective plan train deepspeed compare
# Wheels for packages the machine lacks (distro, deepspeed, pydantic, hjson) are carried in .whl/.
set -uo pipefail
cd "$(dirname "$0")/.."
# The device tool returns at most 8 files: everything is written to a work folder and packed at the end.
FINAL_OUT=${OUT:-$PWD/bench-out}
OUT=/tmp/rocmcheck-session
export OUT
mkdir -p "$OUT" "$FINAL_OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export PATH=/tmp/site/bin:$PATH
if [ "${BYTECODE:-}" = 1 ]; then
    # The lent image sets PYTHONDONTWRITEBYTECODE=1 and ships torch without __pycache__, so every process
    # compiles torch, transformers and deepspeed from source (10-16 s of imports). pip writes that bytecode
    # at install time on a normal machine: let Python write it once here, as pip would have.
    unset PYTHONDONTWRITEBYTECODE
    t0=$(date +%s.%N)
    python3 -m rocmcheck smoke-train -o /tmp/bytecode-warmup --force >/dev/null 2>&1  # imports all a run imports
    echo "bytecode written in $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
fi
run() {  # name, seconds, command...
    local name=$1 secs=$2; shift 2
    echo "=== $name ($(date -u +%H:%M:%S))"
    timeout "$secs" "$@" 2>&1 | tee "$OUT/$name.log"
    echo "=== $name exit ${PIPESTATUS[0]}"
}
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "gpus", torch.cuda.device_count())'
nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv
for step in "$@"; do
    case $step in
        doctor)
            run doctor-json 240 python3 -m rocmcheck doctor --json --no-train --out "$OUT/h200-bundle.json" > /dev/null
            python3 -m rocmcheck doctor --bundle "$OUT/h200-bundle.json" --json > "$OUT/doctor.json"
            run doctor-console 240 python3 -m rocmcheck doctor --arch sm_90 -v
            run bench-doctor 300 python3 benchmarks/bench_doctor.py --repeat 3 --json "$OUT/bench_doctor.json"
            run capture-smi 120 python3 benchmarks/capture_smi_outputs.py ;;
        health) run node-health 300 python3 benchmarks/node_health_nvml.py ;;
        probes) run bench-probes 300 python3 benchmarks/bench_probes.py ;;
        collective) run bench-collective 300 python3 benchmarks/bench_probes.py --collective ;;
        plan) run bench-plan 400 python3 benchmarks/bench_plan.py ;;
        train) run bench-train 480 python3 benchmarks/bench_train.py --bench-ckpt off ;;
        compile-variants) run compile-variants ${VARIANTS_S:-570} python3 benchmarks/bench_compile_variants.py --profile --timeout ${VARIANT_S:-200} ${VARIANTS:-} ;;
        bench) run bench-train-both ${BENCH_S:-480} python3 benchmarks/bench_train.py --bench-ckpt both --skip-default ;;
        compile-default) run compile-default 200 python3 -m rocmcheck smoke-train --compile --out "$OUT/compile-default" ;;
        train-ckpt) run bench-train-ckpt ${CKPT_S:-480} python3 benchmarks/bench_train.py --bench-ckpt on --skip-default ;;
        deepspeed) run bench-deepspeed 420 python3 benchmarks/bench_deepspeed.py ;;
        doctor-full) run doctor-full 240 python3 -m rocmcheck doctor --arch sm_90 --json --out "$OUT/h200-full-bundle.json" ;;
        compare)
            # Two ranks stand in for two nodes (torchrun, each its own GPU, process group and bundle), the
            # cross-node collective between them, then compare on the two bundles and on the whole machine's.
            B="$OUT/compare-bundles"
            run compare-torchrun 420 python3 -m torch.distributed.run --standalone --nproc-per-node 2 --max-restarts 0 \
                -m rocmcheck doctor --node-per-rank --across-nodes --no-train --bundle-dir "$B" --force -v
            run compare-ranks 120 python3 -m rocmcheck compare -v "$B"
            python3 -m rocmcheck compare --json "$B" > "$OUT/compare-ranks.json"
            run compare-whole-doctor 300 python3 -m rocmcheck doctor --no-train --out "$OUT/compare-whole-machine.json"
            run compare-machines 120 python3 -m rocmcheck compare "$B"/*.json "$OUT/compare-whole-machine.json" ${COMPARE_WITH:-}
            python3 -m rocmcheck compare --json "$B"/*.json "$OUT/compare-whole-machine.json" ${COMPARE_WITH:-} > "$OUT/compare-machines.json" ;;
        plan-lora) run bench-plan-lora ${PLAN_LORA_S:-420} python3 benchmarks/bench_plan_lora.py --out "$OUT/bench_plan_lora.json" ${PLAN_LORA_ARGS:-} ;;
        monitor) run bench-monitor ${MONITOR_S:-300} python3 benchmarks/bench_monitor.py ;;
        fp8) run fp8-probe ${FP8_S:-240} python3 benchmarks/bench_fp8_probe.py ;;
        leak)  # the leak finder's held-back variants and a fast climb under monitor; the allocator snapshots are
            # too big to bring back (the verdicts name them)
            run leak-holders ${LEAK_S:-420} python3 benchmarks/bench_leak_holders.py
            find "$OUT" -name 'leak-snapshot-*.pickle' -delete ;;
        families) run families ${FAMILIES_S:-560} python3 benchmarks/bench_families.py ${FAMILIES_ARGS:-} ;;
        stream) run doctor-stream 200 python3 benchmarks/bench_doctor_stream.py ;;
        ds-offload) run ds-offload 300 python3 -m rocmcheck smoke-train --deepspeed recipes/zero3-offload.json ;;
        # smoke-train on own models (random-init folders made here); split so each fits one 10-minute call
        train-parity)  # the default run on one GPU and on two: the same verdict ids and statuses
            run smoke-1gpu 240 python3 -m rocmcheck smoke-train --json -o "$OUT/smoke-1gpu" --force
            run smoke-2gpu 300 python3 -m rocmcheck smoke-train --gpus 2 --json -o "$OUT/smoke-2gpu" --force ;;
        models) run "models-${MODELS// /-}" ${MODELS_S:-300} python3 benchmarks/bench_train_models.py --only $MODELS ;;
        train-time) run train-time ${TIME_S:-500} python3 benchmarks/bench_smoke_train_time.py ${TIME_FLAGS:-} --runs ${TIME_RUNS:-2} \
            --json "$OUT/train-time.json" --variants "${TIME_VARIANTS:-}" ;;
        startup-parts) run startup-parts ${PARTS_S:-300} python3 benchmarks/bench_startup_parts.py --runs ${PARTS_RUNS:-2} ;;
        memory-snapshot) run memory-snapshot 240 python3 -m rocmcheck smoke-train --memory-snapshot -o "$OUT/memory-snapshot" --force ;;
        train-models) run train-models 560 python3 benchmarks/bench_train_models.py --only 1.1b bundled numerics ;;
        train-7b) ROCMCHECK_KEEP_MODELS=1 run train-7b 580 python3 benchmarks/bench_train_models.py --only 7b ;;
        train-7b-lora) run train-7b-lora 580 python3 benchmarks/bench_train_models.py --only 7b-lora ;;
        # Time to verdict (smoke-train, own models, doctor, without bytecode), each beside its floor and peers.
        time) run time-to-verdict ${TTV_S:-540} python3 benchmarks/bench_time_to_verdict.py --budget ${TTV_BUDGET:-500} \
            ${TTV_FLAGS:-} --json "$OUT/time_to_verdict.json" ;;
        level2) run level2 ${L2_S:-300} python3 benchmarks/bench_level2.py ${L2_FLAGS:---no-alone} ;;
        level3) run level3 ${L3_S:-420} python3 benchmarks/bench_level3.py ${L3_FLAGS:---no-alone --duration 60} ;;
        drift)  # the bf16 run against its fp32 twin over every step, three seeds
            for seed in 0 1 2; do
                run "drift-seed$seed" 180 python3 -m rocmcheck smoke-train --drift --seed $seed --json -o "$OUT/drift-$seed" --force
            done ;;
        extensions) run extensions 120 python3 -m rocmcheck doctor --only extensions,bitsandbytes,torch --no-train --no-gpu-probes -v ;;
        plan-purebf16)  # the planner's pure-bf16 estimate against the batch finder's measured peak at micro-batch 2, 4, 8
            run plan-purebf16 240 python3 -c "
from rocmcheck.plan.measure import find_max_micro_batch as f; from rocmcheck.plan.estimate import estimate_memory as e
from rocmcheck.plan.shapes import preset_shape as p
s = p('tinyllama-1.1b')
for b in (2, 4, 8):
    m = f(s, 2048, 0.999, start=b, max_micro_batch=b, max_trials=1, steps=2, precision='pure-bf16')
    t = m.trials[0] if m.trials else None
    est = e(s, micro_batch=b, seq_len=2048, precision='pure-bf16').allocated_peak_bytes
    print('micro-batch', b, m.reason or '', t and t.outcome, 'measured GiB', t and (t.peak_allocated or 0) / 2**30,
          'estimate GiB', est / 2**30)
" ;;
        triage-summary)  # doctor --summary on this machine read back by triage
            python3 -m rocmcheck doctor --summary > "$OUT/summary.txt" 2> "$OUT/summary.err"
            run triage-summary 120 python3 -m rocmcheck triage "$OUT/summary.txt" ;;
        train-faults) run train-faults ${TF_S:-420} python3 benchmarks/bench_train_faults.py --device cuda ;;
        profile-rows) run profile-rows 120 python3 benchmarks/bench_profile_rows.py ;;
        fresh-memory) run fresh-memory 240 python3 benchmarks/bench_fresh_memory.py --gib ${FRESH_GIB:-16} ;;  # first, on a fresh VM
        step-parts) run step-parts ${STEP_PARTS_S:-300} python3 benchmarks/bench_step_parts.py ${STEP_PARTS_FLAGS:-} ;;
        planted-faults) run planted-faults ${PF_S:-240} python3 benchmarks/bench_planted_faults.py --json "$OUT/planted_faults.json" ;;
        compile-bytecode)  # what pip leaves on an installed machine: the bytecode of torch's venv, the wheels, rocmcheck
            run compile-bytecode 120 python3 -m compileall -q -j 0 "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" /tmp/site rocmcheck ;;
        *) echo "unknown step $step" ;;
    esac
done
find "$OUT" -type f | sort
tar czf "$FINAL_OUT/session-$$.tgz" -C "$OUT" .
