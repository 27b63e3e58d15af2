# Top-level driver: `make demo` and `make test` set up, build and run everything from a fresh clone.
BUILD     ?= build
JOBS      ?= $(shell nproc)
VENV      := $(CURDIR)/.venv
CMAKE     := $(VENV)/bin/cmake
CTEST     := $(VENV)/bin/ctest
LLVM_PREFIX = $(shell llvm-config-19 --prefix)
HALIDE_DIR  = $(shell $(VENV)/bin/python -c 'import halide,os;print(os.path.join(os.path.dirname(halide.__file__),"lib64","cmake","Halide"))')

.PHONY: all setup configure build demo test bench ptx-report clean

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/build.ninja: CMakeLists.txt | setup
	$(CMAKE) -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir -DLLVM_DIR=$(LLVM_PREFIX)/lib/cmake/llvm \
	  -DHalide_DIR=$(HALIDE_DIR) -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/build/utils/lit/lit.py \
	  -DPython3_EXECUTABLE=$(VENV)/bin/python

configure: setup $(BUILD)/build.ninja

build: configure
	$(CMAKE) --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/attn-demo

test: build
	cd $(BUILD) && $(CTEST) --output-on-failure -j $(JOBS)

# Speed is measured here, never by tests: attn-bench times the kernels against plain C++ baselines.
bench: build
	$(BUILD)/bin/attn-bench

# The CUDA code of every bundled kernel assembled offline by ptxas, with registers, shared memory
# and spills per GPU kernel (the same check as the ctest ptx_check).
ptx-report: build
	$(VENV)/bin/python scripts/ptx_report.py --attnc $(BUILD)/bin/attnc --variants dsl/variants --jobs $(JOBS)

clean:
	rm -rf $(BUILD)
