#!/usr/bin/env bash
# lint's tests against the oldest and the newest release of each program whose own code lint runs (docs/lint.md,
# "Supported releases"): accelerate, transformers, DeepSpeed and LLaMA-Factory. An upgrade that breaks a stand-in
# or a child process fails here before it reaches a user. Runnable alone, from the environment .ci/run builds.
#
# The LLaMA-Factory edges' packages are installed without compiling their bytecode (--no-compile): .ci/run makes them
# after its suite, where only the part the tests import is worth compiling.
# One venv per edge on top of that environment: --system-site-packages shows it the base interpreter's packages and
# a .pth file the running Python's (torch, deepspeed, ...), after the venv's own; only the one release is installed
# in it. An edge whose release is the one already installed runs in this Python itself, or not at all with
# ROCMCHECK_LINT_MATRIX_SKIP_INSTALLED=1 (.ci/run: its own test run has just run these tests on that release). Venvs
# are kept in ROCMCHECK_LINT_MATRIX (default /tmp/rocmcheck-lint-matrix) and reused when they hold the right release.
# ROCMCHECK_LLAMAFACTORY_PYTHON: a Python with LLaMA-Factory's dependencies (.ci/run's LLaMA-Factory venv), reused
# under each LLaMA-Factory release instead of installing them again.
# Usage: .ci/lint_matrix.sh [accelerate] [transformers] [deepspeed] [llamafactory]  (none named: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1 DS_BUILD_OPS=0 DS_ACCELERATOR=cpu
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
ROOT=${ROCMCHECK_LINT_MATRIX:-/tmp/rocmcheck-lint-matrix}
SKIP_INSTALLED=${ROCMCHECK_LINT_MATRIX_SKIP_INSTALLED:-0}
PREPARE=${ROCMCHECK_LINT_MATRIX_PREPARE:-0}
# Only the LLaMA-Factory edges ask a LLaMA-Factory Python: the others run without one.
# ROCMCHECK_LINT_MATRIX_PREPARE=1: only make the venvs of the oldest accelerate, transformers and DeepSpeed edges (the
# downloads and installs), run no test; .ci/run does it in the background while its suite runs. The newest edges are
# the releases pip resolves for the suite itself, so they are left to the run after it.
LF_GIVEN=${ROCMCHECK_LLAMAFACTORY_PYTHON:-}
unset ROCMCHECK_LLAMAFACTORY_PYTHON
ONLY=" $* "
want() { [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $1 "* ]]; }
mkdir -p "$ROOT"

# The supported ranges (docs/lint.md says the same; change both together).
ACCELERATE=(1.3.0 1.16.0)
TRANSFORMERS=(4.45.2 5.25.0)
DEEPSPEED=(0.15.0 0.19.8)
LLAMAFACTORY=(0.9.4 0.9.5)
# What LLaMA-Factory's argument classes import, at the pins .ci/run uses (docs/recipes.md).
LLAMAFACTORY_DEPS=("datasets>=2.16.0,<=4.0.0" "peft>=0.18.0,<=0.18.1" "trl>=0.18.0,<=0.24.0"
                   "accelerate>=1.3.0,<=1.11.0" omegaconf)

purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
PARENT=$(purelib python)

# venv NAME [SITE...]: the python of a venv that sees SITE... (then this Python's packages) after its own.
venv() {
    local dir="$ROOT/$1"; shift
    [ -x "$dir/bin/python" ] || python -m venv --without-pip --system-site-packages "$dir"
    printf '%s\n' "$@" "$PARENT" > "$(purelib "$dir/bin/python")/rocmcheck-parent-env.pth"
    echo "$dir/bin/python"
}

# version PYTHON DIST: the release of DIST that PYTHON imports ("" when none).
version() { "$1" -c "from importlib import metadata as m; print(m.version('$2'))" 2>/dev/null || true; }

# edge_python DIST VERSION [pip args]: this Python when it has that release ("" with SKIP_INSTALLED=1), else a venv
# with it.
edge_python() {
    local dist=$1 want=$2; shift 2
    if [ "$(version python "$dist")" = "$want" ]; then
        [ "$SKIP_INSTALLED" = 1 ] && echo "" || echo python
        return
    fi
    local py
    py=$(venv "$dist-$want")
    if [ "$(version "$py" "$dist")" != "$want" ]; then
        "$py" -m pip install -q --no-build-isolation "$@" "$dist==$want" >&2
    fi
    echo "$py"
}

run() {  # LABEL PYTHON PYTEST-ARGS... (no PYTHON: the edge is this Python's release, tested by .ci/run already)
    local label=$1 py=$2; shift 2
    if [ -z "$py" ]; then echo "== lint matrix: $label: the installed release, tested by this CI run"; return; fi
    echo "== lint matrix: $label"
    local start=$SECONDS
    "$py" -m pytest -q -p no:cacheprovider "$@"
    echo "== $label: $((SECONDS - start)) s"
}

ACC_TESTS=(tests/test_lint_accelerate.py tests/test_lint_public_configs.py -k "accelerate or trl or alignment or 201")
TF_TESTS=(tests/test_lint_training.py tests/test_lint_hf_auto.py)
DS_TESTS=(tests/test_lint_deepspeed.py tests/test_lint_hf_auto.py
          -k "deepspeed_itself_confirms or catches_what or real_hf_trainer")

if [ "$PREPARE" = 1 ]; then
    edge_python accelerate "${ACCELERATE[0]}" --no-deps >/dev/null
    edge_python transformers "${TRANSFORMERS[0]}" >/dev/null
    edge_python deepspeed "${DEEPSPEED[0]}" --no-deps >/dev/null
    exit 0
fi
want accelerate && for v in "${ACCELERATE[@]}"; do run "accelerate $v" "$(edge_python accelerate "$v" --no-deps)" "${ACC_TESTS[@]}"; done
# transformers pins its own tokenizers and huggingface_hub: those come into its venv with it.
want transformers && for v in "${TRANSFORMERS[@]}"; do run "transformers $v" "$(edge_python transformers "$v")" "${TF_TESTS[@]}"; done
want deepspeed && for v in "${DEEPSPEED[@]}"; do run "DeepSpeed $v" "$(edge_python deepspeed "$v" --no-deps)" "${DS_TESTS[@]}"; done

# LLaMA-Factory: its dependencies in one venv (or the one ROCMCHECK_LLAMAFACTORY_PYTHON has), each release in its own
# venv on top of it, without dependencies (a plain install replaces torch with a CUDA build). lint asks it in a child
# through ROCMCHECK_LLAMAFACTORY_PYTHON.
want llamafactory || exit 0
if [ -n "$LF_GIVEN" ]; then
    LF_DEPS=$LF_GIVEN
else
    LF_DEPS=$(venv llamafactory-deps)
    "$LF_DEPS" -m pip install -q --no-compile "${LLAMAFACTORY_DEPS[@]}" "torch==$(version python torch | cut -d+ -f1)"
fi
for v in "${LLAMAFACTORY[@]}"; do
    if [ "$(version "$LF_DEPS" llamafactory)" = "$v" ]; then
        py=$LF_DEPS
        [ "$SKIP_INSTALLED" = 1 ] && py=""
    else
        py=$(venv "llamafactory-$v" "$(purelib "$LF_DEPS")")
        [ "$(version "$py" llamafactory)" = "$v" ] || "$py" -m pip install -q --no-compile --no-deps "llamafactory==$v"
    fi
    ROCMCHECK_LLAMAFACTORY_PYTHON=$py run "LLaMA-Factory $v" "${py:+python}" tests/test_lint_training.py \
        -k llamafactory_classes
done
