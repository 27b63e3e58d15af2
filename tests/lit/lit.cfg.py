# lit configuration for attnc: .attn and .mlir files are tests; RUN lines use attnc, attn-opt, attn-run, attn-tune.
import os
import lit.formats

config.name = "attnc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".attn", ".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attnc_obj_root, "tests", "lit")

# Tools: attnc's own first, then LLVM 19's FileCheck, not and count.
path = os.pathsep.join([config.attnc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.environment["PATH"] = path
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%variants", os.path.join(config.attnc_src_root, "dsl", "variants")))
config.substitutions.append(("%attnc_std", os.path.join(config.attnc_src_root, "dsl", "std")))
config.substitutions.append(("%examples", os.path.join(config.attnc_src_root, "examples")))
for tool in ["attnc", "attn-opt", "attn-run", "attn-tune", "FileCheck", "not", "count"]:
    d = config.attnc_tools_dir if tool.startswith("attn") else config.llvm_tools_dir
    if not os.path.exists(os.path.join(d, tool)):
        lit_config.fatal("lit: cannot find %s in %s" % (tool, d))

# Tools built with sanitizers (make test-asan): every test runs, and every kernel it compiles is
# compiled there at least once, but the sweeps of a kernel already compiled in that test (more
# schedules, online tiles, targets, configurations of the same variant) say `%if !sanitized %{...%}`
# and run in `make test` only. They add little to the sanitized run (the same front end, passes and
# HalideGen again) and cost most of it: uninstrumented libHalide compiling in ASan's allocator,
# about 1.5 times its release time, put CI past its 90 minutes on a Zen 3 runner (2026-12-02).
if getattr(config, "attnc_sanitize", ""):
    config.available_features.add("sanitized")

# The CUDA toolkit's ptxas assembles PTX offline (no GPU needed): tests that assemble it say
# `REQUIRES: ptxas` and are reported unsupported where the toolkit is missing.
import shutil
ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.access("/usr/local/cuda/bin/ptxas", os.X_OK) else None)
if ptxas:
    config.available_features.add("ptxas")
    config.substitutions.append(("%ptxas", ptxas))

# A CUDA device (driver and GPU): tests that run kernels on it say `REQUIRES: cuda-device`; the
# ones that check the behaviour without a GPU say `UNSUPPORTED: cuda-device`.
def _cuda_device():
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        n = ctypes.c_int(0)
        return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(n)) == 0 and n.value > 0
    except OSError:
        return False
if _cuda_device():
    config.available_features.add("cuda-device")
