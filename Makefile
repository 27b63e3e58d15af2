# Top-level driver: `make demo` and `make test` set up, build and run everything from a fresh clone.
BUILD     ?= build
JOBS      ?= $(shell nproc)
VENV      := $(CURDIR)/.venv
CMAKE     := $(VENV)/bin/cmake
CTEST     := $(VENV)/bin/ctest
LLVM_PREFIX = $(shell llvm-config-19 --prefix)
HALIDE_DIR  = $(shell $(VENV)/bin/python -c 'import halide,os;print(os.path.join(os.path.dirname(halide.__file__),"lib64","cmake","Halide"))')

.PHONY: all setup configure build demo test format format-check bench bench-tuned ptx-report clean test-asan fuzz fuzz-build

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

test: build format-check
	cd $(BUILD) && $(CTEST) --output-on-failure -j $(JOBS)

# One C++ style (.clang-format), checked with the clang-format the set-up installs (versions
# format differently): `make format` applies it to every tracked C++ file, `make format-check`
# (part of `make test`) fails on any file it would change.
CLANG_FORMAT ?= clang-format-19
CXX_SOURCES = $(shell git ls-files '*.cpp' '*.h' 2>/dev/null || find dsl compiler schedules runtime tools tests examples \( -name '*.cpp' -o -name '*.h' \))
format: setup
	$(CLANG_FORMAT) -i $(CXX_SOURCES)
format-check: setup
	$(CLANG_FORMAT) --dry-run -Werror $(CXX_SOURCES)

# Speed is measured here, never by tests: attn-bench times the kernels against baselines measured
# in the same run. `make bench` builds the bench kernels under Halide's autoschedulers too, then
# (TUNE_BUDGET seconds per kernel, 0 to skip) runs attn-tune on the quiet machine and builds the
# tuned kernels from its database, then runs attn-bench (BENCH_ARGS, e.g. --json=bench.json).
TUNE_BUDGET ?= 120
BENCH_ARGS ?=
bench: configure
	$(CMAKE) -S . -B $(BUILD) -DATTN_BENCH_AUTOSCHEDULERS=ON -DATTN_BENCH_TUNE_BUDGET=$(TUNE_BUDGET) -DATTN_BENCH_TUNING_DB=
	$(CMAKE) --build $(BUILD) -j $(JOBS)
ifneq ($(TUNE_BUDGET),0)
	$(CMAKE) --build $(BUILD) --target bench_tune
	$(CMAKE) -S . -B $(BUILD) -DATTN_BENCH_TUNING_DB=$(abspath $(BUILD))/bench-tuning.json
	$(CMAKE) --build $(BUILD) -j $(JOBS)
endif
	$(BUILD)/bin/attn-bench $(BENCH_ARGS)

# Former name of the tuned benchmark, which `make bench` now always is.
bench-tuned: bench

# The CUDA code of every bundled kernel (f32, bf16 and f16 tensors) assembled offline by ptxas,
# with registers, shared memory and spills per GPU kernel (the same check as the ctest ptx_check).
ptx-report: build
	$(VENV)/bin/python scripts/ptx_report.py --attnc $(BUILD)/bin/attnc --variants dsl/variants --dtypes f32,bf16,f16 --jobs $(JOBS)

# --- hardening (README "Hardening") ----------------------------------------------------------
# Both builds get their own directory and the same dependencies as $(BUILD); asserts stay on
# (no NDEBUG) and -g1 gives sanitizer reports file:line. No PyTorch operators (ATTNC_TORCH=OFF):
# their modules load into PyTorch's uninstrumented Python, which a sanitized module cannot join.
HARDEN_CMAKE_ARGS = -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DMLIR_DIR=$(LLVM_PREFIX)/lib/cmake/mlir -DLLVM_DIR=$(LLVM_PREFIX)/lib/cmake/llvm \
  -DHalide_DIR=$(HALIDE_DIR) -DLLVM_EXTERNAL_LIT=$(LLVM_PREFIX)/build/utils/lit/lit.py \
  -DPython3_EXECUTABLE=$(VENV)/bin/python -DATTNC_TORCH=OFF
SANITIZERS = address,undefined,float-cast-overflow
# Instrumented frames are many times larger: the deepest expression the parser admits (tree
# height 2000) needs about 1 MB of stack in $(BUILD) but 16-32 MB under ASan, so sanitized runs
# get SANITIZER_STACK_KB instead of the usual 8 MB.
SANITIZER_STACK_KB = 131072
# Every report (ASan, UBSan, LeakSanitizer) is fatal and prints its stack; there are no suppressions.
SANITIZER_ENV = ASAN_OPTIONS=halt_on_error=1:detect_leaks=1:print_stacktrace=1:strict_string_checks=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

# The whole project (gcc) with AddressSanitizer and UndefinedBehaviorSanitizer, then every ctest
# but the sweeps. The AOT kernels are copied from $(BUILD) (ATTNC_PREBUILT_KERNELS): the code
# Halide generates is never instrumented, so they are the same bits, and compiling them again was
# most of the sanitized build; the instrumented attnc, attn-run and attn-tune still run every lit
# test. The
# sweeps (ctest label `sweep`: ptx_check, plan_work_check, numerics_fuzz_quick) run the release
# tools over every kernel, paths the sanitized lit and unit tests already take; under ASan they
# took longer than all the rest together and put CI past its 90 minutes. attnc-based tests run
# with the sanitizer environment; package_example configures a fresh project that links the
# instrumented runtime: CMake takes its first CXXFLAGS/LDFLAGS from the environment.
ASAN_BUILD ?= build-asan
$(ASAN_BUILD)/build.ninja: CMakeLists.txt | setup
	$(CMAKE) -S . -B $(ASAN_BUILD) $(HARDEN_CMAKE_ARGS) -DATTNC_SANITIZE=$(SANITIZERS) \
	  -DATTNC_PREBUILT_KERNELS=$(abspath $(BUILD))

test-asan: build $(ASAN_BUILD)/build.ninja
	ulimit -s $(SANITIZER_STACK_KB) && env $(SANITIZER_ENV) $(CMAKE) --build $(ASAN_BUILD) -j $(JOBS)
	ulimit -s $(SANITIZER_STACK_KB) && cd $(ASAN_BUILD) && env $(SANITIZER_ENV) CXXFLAGS=-fsanitize=$(SANITIZERS) LDFLAGS=-fsanitize=$(SANITIZERS) \
	  $(CTEST) --output-on-failure -j $(JOBS) -LE sweep

# Fuzzing (README "Hardening"): each of FUZZ_TARGETS runs for FUZZ_SECONDS; the first that fails
# stops `make fuzz` with a non-zero status and leaves its input in $(FUZZ_BUILD)/fuzz-artifacts.
#  - frontend, npy: libFuzzer targets (clang-19, ASan + UBSan + coverage) for the front end and the
#    .npy reader, from their seed corpora plus what earlier runs found (kept in
#    $(FUZZ_BUILD)/fuzz-work/<target>). A crash, leak or hang (> FUZZ_TIMEOUT s on one input) fails.
#  - numerics: tests/fuzz/numerics_fuzz.py, generated kernels and inputs (NaN, inf, huge, tiny values,
#    masked rows) compiled by the normal build's attn-run ($(NUMERICS_BIN)) under every schedule rule
#    that applies, against the fp64 reference interpreter. It needs no libFuzzer build:
#    `make fuzz FUZZ_TARGETS=numerics FUZZ_SECONDS=3600` is an hour of it. A mismatch, crash, raw
#    Halide error or timeout fails and leaves $(FUZZ_BUILD)/fuzz-artifacts/numerics-<seed>/ (kernel,
#    inputs, outputs, report.txt, repro.sh). NUMERICS_FLAGS adds options (--finite-only,
#    --no-nan, --families=attention, --skip-feature=fn-log, --keep-going, --jobs=2 ...; --help
#    lists them).
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TIMEOUT ?= 60
FUZZ_TARGETS ?= frontend npy numerics
FUZZ_FLAGS   ?=
NUMERICS_BIN ?= $(BUILD)/bin
NUMERICS_FLAGS ?=
LIBFUZZER_TARGETS = $(filter-out numerics,$(FUZZ_TARGETS))
$(FUZZ_BUILD)/build.ninja: CMakeLists.txt | setup
	$(CMAKE) -S . -B $(FUZZ_BUILD) $(HARDEN_CMAKE_ARGS) -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
	  -DATTNC_SANITIZE=address,undefined -DATTNC_FUZZ=ON

fuzz-build: setup $(FUZZ_BUILD)/build.ninja
	$(CMAKE) --build $(FUZZ_BUILD) -j $(JOBS) --target $(LIBFUZZER_TARGETS:%=fuzz_%) attnc_fuzz_corpus

fuzz: $(if $(LIBFUZZER_TARGETS),fuzz-build) $(if $(filter numerics,$(FUZZ_TARGETS)),build)
	@mkdir -p $(FUZZ_BUILD)/fuzz-artifacts
	@set -e; for t in $(FUZZ_TARGETS); do \
	  if [ "$$t" = numerics ]; then \
	    echo "fuzz: numerics for $(FUZZ_SECONDS) s"; \
	    $(VENV)/bin/python tests/fuzz/numerics_fuzz.py --bin $(NUMERICS_BIN) --seconds $(FUZZ_SECONDS) \
	      --artifacts $(FUZZ_BUILD)/fuzz-artifacts $(NUMERICS_FLAGS); \
	    continue; \
	  fi; \
	  mkdir -p $(FUZZ_BUILD)/fuzz-work/$$t; \
	  echo "fuzz: fuzz_$$t for $(FUZZ_SECONDS) s"; \
	  ( ulimit -s $(SANITIZER_STACK_KB) && env $(SANITIZER_ENV) $(FUZZ_BUILD)/bin/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=$(FUZZ_TIMEOUT) -rss_limit_mb=4096 -print_final_stats=1 -dict=tests/fuzz/$$t.dict \
	    -artifact_prefix=$(FUZZ_BUILD)/fuzz-artifacts/$$t- $(FUZZ_FLAGS) \
	    $(FUZZ_BUILD)/fuzz-work/$$t $(FUZZ_BUILD)/tests/fuzz/corpus/$$t ); \
	done

clean:
	rm -rf $(BUILD)
