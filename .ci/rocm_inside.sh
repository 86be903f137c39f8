#!/usr/bin/env bash
# Runs inside the ROCm root (see .ci/rocm.sh): /src is a copy of the checkout, /out is kept for the log.
set -euo pipefail
START=$SECONDS
step() { printf '\n== [%3ss] (root) %s\n' "$((SECONDS - START))" "$*"; }

step "tools: $(dpkg-query -W -f '${Package} ${Version}, ' rocminfo rocm-smi hipcc libamdhip64-dev amd-smi cmake 2>/dev/null)"
step "pip install rocmcheck (no index: its dependencies are Debian's, seen through the venv's system site)"
python3 -m pip install -q --no-deps --no-index --no-build-isolation /src
rocmcheck doctor --help > /out/doctor-help.txt
for flag in --no-train --no-gpu-probes --json --out --bundle; do
    grep -q -- "$flag" /out/doctor-help.txt || { echo "doctor has no $flag" >&2; exit 1; }
done

step "the smoke subset of the tests (CLI, config, lint, triage) on $(python3 --version), Debian's pytest"
(cd /src && python3 -m pytest -q -p no:cacheprovider tests/test_cli_exit.py tests/test_config_defaults.py \
    tests/test_lint_deepspeed.py tests/test_lint_codes.py tests/test_triage_readers.py tests/test_triage_cli.py)

step "doctor --no-train --no-gpu-probes --json --out"
set +e
rocmcheck doctor --no-train --no-gpu-probes --json --out /out/bundle.json > /out/doctor.json 2> /out/doctor.err
DOCTOR_RC=$?
rocmcheck doctor --no-train --no-gpu-probes --json --bundle /out/bundle.json > /out/replay.json 2> /out/replay.err
REPLAY_RC=$?
set -e
echo "doctor exit $DOCTOR_RC, replay exit $REPLAY_RC"
python3 /src/.ci/rocm_doctor_check.py /out/doctor.json /out/replay.json /out/bundle.json "$DOCTOR_RC" "$REPLAY_RC" \
    || { head -c 3000 /out/doctor.err; exit 1; }

step "build-env proven by building (hipcc, CMake; code objects read back)"
python3 /src/.ci/rocm_build_env_check.py /out/build-env

step "code objects: the fixtures rebuilt with this hipcc, read by rocmcheck and by llvm-objdump"
python3 /src/.ci/code_objects_check.py /out/code-objects
step "done"
