// What schedule rules know about the machine they schedule for, derived once from a Halide target.
//
// Rules read this struct, never Halide::Target's features: a new target (another CPU extension,
// another GPU API) is described here, and only the rules that schedule differently for it change.
#pragma once

#include "Halide.h"

#include <map>
#include <optional>
#include <string>

namespace attnc {

struct Target {
  explicit Target(const Halide::Target &t)
      : gpu(t.has_gpu_feature()), cuda(t.has_feature(Halide::Target::CUDA)),
        cudaCapability(cuda ? t.get_cuda_capability_lower_bound() : 0),
        floatLanes(t.natural_vector_size<float>()),
        fma(t.has_feature(Halide::Target::FMA) || t.has_feature(Halide::Target::FMA4) ||
            (t.arch == Halide::Target::ARM && t.bits == 64)),
        avx512(t.arch == Halide::Target::X86 && t.has_feature(Halide::Target::AVX512)),
        vectorRegisters(avx512 || (t.arch == Halide::Target::ARM && t.bits == 64) ? 32 : 16),
        bf16Dot(t.arch == Halide::Target::X86 &&
                t.features_any_of({Halide::Target::AVX512_Zen4, Halide::Target::AVX512_Zen5,
                                   Halide::Target::AVX512_SapphireRapids})),
        amx(t.arch == Halide::Target::X86 && t.has_feature(Halide::Target::AVX512_SapphireRapids)) {
  }

  // Any GPU API: the CPU rules decline such targets.
  bool gpu = false;
  // CUDA (the cuda-* rules), and the lowest compute capability the target asks for (80 for
  // cuda_capability_80); 0 without CUDA.
  bool cuda = false;
  int cudaCapability = 0;
  // Host vector unit: floats per native vector (16 with AVX-512, 8 with AVX2), whether it has
  // fused multiply-adds (x86's FMA or FMA4; every 64-bit ARM core) and AVX-512.
  int floatLanes = 1;
  bool fma = false;
  bool avx512 = false;
  // Architectural vector registers, which bound a register block's accumulators: 32 with
  // AVX-512 (zmm0-31) and on 64-bit ARM (v0-31), 16 otherwise (SSE/AVX/AVX2's xmm/ymm0-15).
  int vectorRegisters = 16;
  // A bf16 dot product (AVX512_BF16's vdpbf16ps: per 32-bit lane, two bf16 products added into
  // an f32), which Halide emits for an f32 sum of products of two bf16 casts reduced in pairs:
  // x86 with Halide's avx512_zen4, avx512_zen5 or avx512_sapphirerapids (Zen 4 and later,
  // Sapphire Rapids and later).
  bool bf16Dot = false;
  // AMX tiles (tdpbf16ps: a 16 x 16 f32 tile += 16 x 32 bf16 times 32 x 16 bf16 per
  // instruction), which Halide emits for a Func stored in MemoryType::AMXTile: x86 with
  // avx512_sapphirerapids, the one Halide feature that implies AMX. Linux must be asked for the
  // tile state before the first tile instruction (attnc::request_tile_state in the runtime).
  bool amx = false;

  // A JIT compile that runs once at known sizes (attn-run): every buffer's extents and mins at
  // those sizes, as Halide's front end names them ("k.extent.1", "o.min.0"). Rules then compile
  // only the specialisations those sizes take (specializeFor in Schedule.h): the same code the
  // ahead-of-time kernel runs at them, without the copies for other sizes (a padded online
  // kernel's compile: 8.2 -> 2.5 s on Zen 4). Empty ahead of time, where sizes are not known.
  std::map<std::string, int64_t> runBuffers;
  // `cond` at runBuffers: nullopt ahead of time or where the sizes do not decide it.
  std::optional<bool> atRun(const Halide::Expr &cond) const;
};

} // namespace attnc
