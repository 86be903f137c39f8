#!/usr/bin/env bash
# Build (once) the Debian sid root with the distribution's ROCm userspace packages, cached under
# $ROCMCHECK_CI_CACHE (default /var/cache/rocmcheck-ci). Prints the root's path on stdout.
#
# Debian ships ROCm in /usr (no /opt/rocm): the same layout Ubuntu's universe, Fedora and Arch use.
# Nothing here needs a GPU. The mirror is read from the machine's own apt sources; it may be a dated
# snapshot, so apt inside the root is told not to reject an expired Release file.
# Env: ROCMCHECK_CI_REBUILD_ROOT=1 rebuilds the cached root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

CACHE=${ROCMCHECK_CI_CACHE:-/var/cache/rocmcheck-ci}
ROOT=$CACHE/rocm-sid-root
# Bump when the package list changes: a root built from another list is rebuilt.
# rocmcheck's own dependencies come from Debian too, so installing it needs no package index; /opt/venv
# sees them (and Debian's amdsmi module, shipped in the amd-smi package) through the system site-packages.
# pytest, hypothesis and jsonschema run the smoke subset of the tests on the root's Python, Debian sid's newest.
RECIPE="v3 rocminfo rocm-smi hipcc libamdhip64-dev rocm-device-libs-21 llvm-21 cmake make python3 python3-venv
 python3-click python3-rich python3-packaging python3-distro python3-yaml python3-setuptools python3-pytest
 python3-hypothesis python3-jsonschema +amd-smi +python3-amdsmi"
log() { echo "rocm-root: $*" >&2; }

if [ "${ROCMCHECK_CI_REBUILD_ROOT:-0}" != 1 ] && [ -f "$ROOT/.rocmcheck-ci-recipe" ] \
        && [ "$(cat "$ROOT/.rocmcheck-ci-recipe")" = "$RECIPE" ]; then
    log "cached: $ROOT"
    echo "$ROOT"
    exit 0
fi

command -v debootstrap >/dev/null || { apt-get update -q >&2 && apt-get install -y -q debootstrap >&2; }
MIRROR=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 || true)
if [ -z "$MIRROR" ]; then
    MIRROR=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
fi
[ -n "$MIRROR" ] || { log "no Debian mirror found in the apt sources"; exit 1; }

mkdir -p "$CACHE"
NEW=$(mktemp -d "$CACHE/rocm-sid-root.new.XXXXXX")
chmod 755 "$NEW"  # it becomes the image's /: mktemp made it 0700
trap 'rm -rf "$NEW"' EXIT
log "debootstrap sid from $MIRROR into $NEW"
debootstrap --variant=minbase --include=ca-certificates sid "$NEW" "$MIRROR" > "$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }

# Required packages, plus the optional ones (leading +) the suite has at the moment.
want=()
for p in ${RECIPE#v[0-9]* }; do
    case $p in
        +*) p=${p#+}
            if chroot "$NEW" apt-cache show "$p" >/dev/null 2>&1; then want+=("$p"); else log "not packaged: $p"; fi ;;
        *) want+=("$p") ;;
    esac
done
log "apt-get install ${want[*]}"
chroot "$NEW" apt-get install -y -q --no-install-recommends "${want[@]}" > "$CACHE/apt.log" 2>&1 \
    || { tail -30 "$CACHE/apt.log" >&2; exit 1; }
chroot "$NEW" apt-get clean
chroot "$NEW" python3 -m venv --system-site-packages /opt/venv
echo "$RECIPE" > "$NEW/.rocmcheck-ci-recipe"

rm -rf "$ROOT"
mv "$NEW" "$ROOT"
trap - EXIT
log "built: $ROOT ($(du -sh "$ROOT" | cut -f1))"
echo "$ROOT"
