#!/usr/bin/env bash
# The Python package's CI: a virtual environment with pinned PyTorch, transformers, onnx,
# onnxruntime and pytest, then `pip install ./python` (the README's set-up, which builds
# the Rust extension with maturin), then pytest over python/tests. Called by .ci/run after
# the Rust build (the API tests compare with target/release/dnnplace).
#
# pytest exit 5 (no test collected) is a failure here: a CI that ran nothing has not passed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
venv="${DNNPLACE_PY_VENV:-$root/target/py-venv}"
started=$SECONDS

# The Rust build of the extension reuses target/ when the build tools are the ones the
# Makefile set (a change of CMAKE or LIBCLANG_PATH would rebuild HiGHS).
if [ -z "${CMAKE:-}" ] && ! command -v cmake >/dev/null 2>&1 && [ -x "$root/.tools/cmake/data/bin/cmake" ]; then
  export CMAKE="$root/.tools/cmake/data/bin/cmake"
fi
if [ -z "${LIBCLANG_PATH:-}" ] && [ -d "$root/.tools/clang/native" ]; then
  export LIBCLANG_PATH="$root/.tools/clang/native"
fi

python3 -m venv "$venv"
# No wheel cache: torch and its CUDA wheels would take ≈3.5 GB of disk a second time.
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir)
"${pip[@]}" torch==2.15.0 transformers==5.23.0 onnxruntime==1.31.1 onnx==1.23.2 pytest==9.2.0 \
  tyro==1.0.17 docstring-parser==0.18.0 typeguard==4.6.1
# torchtitan's ConfigManager reads the torchtitan exports (tests/test_exports_3d.py): the
# 0.2.2 wheel (the last with TOML job files), without its training stack (torchdata,
# datasets, tensorboard), which the config parser does not import.
"${pip[@]}" --no-deps torchtitan==0.2.2
# DeepSpeed's DeepSpeedConfig and pipeline topology read the DeepSpeed exports: the 0.19.8
# source package built without its ops (pure Python), and its light dependencies.
"${pip[@]}" einops==0.8.2 hjson==3.1.0 msgpack==1.2.4 ninja==1.13.2 psutil==7.2.2 \
  py-cpuinfo==9.0.0 pydantic==2.14.4 tqdm==4.70.1 setuptools==84.2.1
DS_BUILD_OPS=0 "${pip[@]}" --no-deps --no-build-isolation deepspeed==0.19.8
echo "python ci: dependencies installed in $((SECONDS - started)) s"
"${pip[@]}" "$here"
echo "python ci: dnnplace built and installed at $((SECONDS - started)) s"

cd "$here"
set +e
# The pytest script, not `python -m pytest`: the latter puts this folder on sys.path, where
# the source package (without its compiled extension) would shadow the installed one.
"$venv/bin/pytest" tests -v -rs -s -p no:cacheprovider
rc=$?
set -e
echo "python ci: pytest finished at $((SECONDS - started)) s (exit $rc)"
if [ "$rc" -eq 5 ]; then
  echo "python ci: pytest collected no test" >&2
  exit 1
fi
exit "$rc"
