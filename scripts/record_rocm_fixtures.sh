#!/usr/bin/env bash
# Record the real outputs of Debian's ROCm tools (no GPU, no amdgpu driver) as test fixtures.
#
#   bash scripts/record_rocm_fixtures.sh [OUTDIR]     (root; default OUTDIR tests/fixtures/debian-sid-rocm)
#
# The root comes from .ci/rocm_root.sh (Debian sid + its ROCm packages, cached). Each command runs in it
# with a clean environment; NAME.stdout.txt / NAME.stderr.txt hold its output byte for byte (colour codes
# included), commands.json its argv and exit code, packages.txt the package versions.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-tests/fixtures/debian-sid-rocm}
ROOT=$(bash .ci/rocm_root.sh)
mkdir -p "$OUT"

inroot() {  # run argv in the root with /proc, /sys and /dev of this machine, in a private mount namespace
    unshare --mount --propagation private -- sh -c 'R=$1; shift; mount -t proc proc "$R/proc" &&
        mount --rbind /sys "$R/sys" && mount --rbind /dev "$R/dev" &&
        exec chroot "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"' sh "$ROOT" "$@"
}

manifest="["
record() {  # record NAME argv...
    local name=$1; shift
    set +e
    inroot "$@" > "$OUT/$name.stdout.txt" 2> "$OUT/$name.stderr.txt"
    local rc=$?
    set -e
    echo "$name: exit $rc"
    manifest+=$(python3 -c 'import json,sys; print(json.dumps({"name": sys.argv[1], "rc": int(sys.argv[2]), "argv": sys.argv[3:]}))' "$name" "$rc" "$@")","
}

record rocminfo rocminfo
record rocm-smi rocm-smi
record rocm-smi-json rocm-smi --showproductname --showmeminfo vram --json
record rocm-smi-showdriverversion rocm-smi --showdriverversion
record hipconfig-version hipconfig --version
record hipconfig-full hipconfig --full
record hipconfig-rocmpath hipconfig --rocmpath
record hipconfig-path hipconfig --path
if inroot sh -c 'command -v amd-smi' >/dev/null; then
    record amd-smi-version amd-smi version
    record amd-smi-static-json amd-smi static --json
    record amd-smi-list amd-smi list
    record amd-smi-firmware amd-smi firmware
fi
echo "${manifest%,}]" | python3 -m json.tool > "$OUT/commands.json"
inroot dpkg-query -W -f '${Package}\t${Version}\n' rocminfo rocm-smi hipcc libamdhip64-dev 'libamdhip64-*' \
    'rocm-device-libs-*' amd-smi 'libamd-smi*' 'librocm-smi64-*' 'libhsa-runtime64-*' clang-21 llvm-21 cmake \
    2>/dev/null | awk -F'\t' '$2 != ""' | sort -u > "$OUT/packages.txt" || true
grep -m1 PRETTY_NAME "$ROOT/etc/os-release" > "$OUT/os-release.txt"
# What rocmcheck's ROCm-location rule observes in that root (read from outside it, paths as seen inside).
PYTHONPATH=$PWD python3 -c 'import json, sys
from rocmcheck.facts.rocm_location import observe_layout
print(json.dumps(observe_layout({}, sys.argv[1]), indent=1, sort_keys=True))' "$ROOT" > "$OUT/rocm-layout.json"
echo "recorded into $OUT"
