#!/usr/bin/env bash
# doctor and build-env against ROCm's real userspace, on a CPU machine: Debian's ROCm packages (rocminfo,
# rocm-smi, amd-smi, hipcc, HIP, clang 21, CMake) in a root built once and cached (.ci/rocm_root.sh).
#
# This is the layout of Debian's, Ubuntu's universe, Fedora's and Arch's ROCm: everything in /usr, no
# /opt/rocm, no .info/version, hipconfig says ROCM_PATH=/usr, and no amdgpu driver (no GPU here).
# The run happens in a throw-away overlay of the cached root (the cache stays clean): rocmcheck is
# installed from this checkout into the root's /opt/venv with the root's python3, then
#   .ci/rocm_doctor_check.py   doctor's verdicts there, and the same verdicts from its saved bundle;
#   .ci/rocm_build_env_check.py build-env proven by building (hipcc and CMake, code objects read back).
# Needs root (unshare, overlay mounts, chroot). Env: ROCMCHECK_CI_REBUILD_ROOT=1 rebuilds the cached root.
set -euo pipefail
cd "$(dirname "$0")/.."
START=$SECONDS
step() { printf '\n== [%3ss] %s\n' "$((SECONDS - START))" "$*"; }
fail() { echo "rocm-ci: FAIL: $*" >&2; exit 1; }

step "ROCm root (Debian sid + its ROCm packages; cached)"
ROOT=$(bash .ci/rocm_root.sh) || fail "could not build the ROCm root"

W=$(mktemp -d /tmp/rocmcheck-rocm-ci.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/upper" "$W/work" "$W/m" "$W/out" "$W/src"

step "the checkout, copied for the root"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z -co --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -C "$W/src" -xf -
else
    tar --exclude=.git -cf - . | tar -C "$W/src" -xf -
fi

# The doctor's assertions are about a machine with no amdgpu driver; on one that has it they do not hold.
NO_DRIVER=1
if [ -e /dev/kfd ] || [ -e /sys/module/amdgpu ]; then NO_DRIVER=0; echo "this machine has the amdgpu driver: doctor's no-driver assertions are skipped"; fi

step "in the root: install rocmcheck, doctor + bundle replay, build-env compiles"
set +e
unshare --mount --propagation private -- sh -c '
    set -e; R=$1; W=$2; NO_DRIVER=$3
    mount -t overlay overlay -o "lowerdir=$R,upperdir=$W/upper,workdir=$W/work" "$W/m"
    mount -t proc proc "$W/m/proc"
    mount --rbind /sys "$W/m/sys"
    mount --rbind /dev "$W/m/dev"
    mkdir -p "$W/m/src" "$W/m/out"
    mount --bind "$W/src" "$W/m/src"
    mount --bind "$W/out" "$W/m/out"
    exec chroot "$W/m" env -i PATH=/opt/venv/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        ROCMCHECK_CI_NO_DRIVER="$NO_DRIVER" bash /src/.ci/rocm_inside.sh' sh "$ROOT" "$W" "$NO_DRIVER"
rc=$?
set -e
[ "$rc" -eq 0 ] || fail "the stage inside the ROCm root failed (exit $rc)"
step "ROCm stage passed"
