# The README's quick start: `make plan` and `make test`, on a fresh machine with a Rust
# toolchain, a C/C++ compiler, make and Python.
#
# HiGHS (the MILP solver behind --method ip) is built from source by the highs-sys crate, which
# needs cmake and libclang (for its bindings). Where the machine has neither, they are fetched
# from PyPI (the `cmake` and `libclang` wheels) into .tools/ inside the checkout; nothing is
# installed system-wide. A machine that has them uses its own.

TOOLS := $(CURDIR)/.tools
CARGO ?= cargo
PYTHON ?= python3

HAVE_CMAKE := $(shell command -v cmake 2>/dev/null)
HAVE_LIBCLANG := $(shell ldconfig -p 2>/dev/null | grep -E 'libclang(-[0-9.]+)?\.so' | head -n 1)

NEED :=
ifeq ($(CMAKE)$(HAVE_CMAKE),)
  NEED += cmake
  export CMAKE := $(TOOLS)/cmake/data/bin/cmake
endif
ifeq ($(HAVE_LIBCLANG)$(LIBCLANG_PATH),)
  NEED += libclang
  export LIBCLANG_PATH := $(TOOLS)/clang/native
endif

.PHONY: plan test build tools bench clean-tools

## Optimal split of the shipped 6-layer BERT on 4 GPUs (builds first).
plan: tools
	$(CARGO) run --release --locked -- plan examples/bert-tiny.json

## The whole test suite (tests over ../shared/workloads skip, saying so, where it is absent).
test: tools
	$(CARGO) test --release --locked

build: tools
	$(CARGO) build --release --locked

## The DP over the published throughput workloads (needs ../shared beside the checkout).
bench: build
	./target/release/dnnplace bench ../shared/workloads/paper/throughput

tools: $(if $(strip $(NEED)),$(TOOLS)/.stamp)

$(TOOLS)/.stamp:
	@echo "fetching build tools into .tools/ (not found on this machine):$(NEED)"
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target $(TOOLS) cmake libclang
	@touch $@

clean-tools:
	rm -rf $(TOOLS)
