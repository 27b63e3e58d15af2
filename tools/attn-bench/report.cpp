// The summary table and the JSON report of an attn-bench run.
#include "report.h"

#include "attnc/output.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace attn_bench {
namespace {

const ImplResult *find(const CaseResult &r, const std::string &kind) {
  for (const ImplResult &x : r.impls)
    if (x.kind == kind && x.runs > 0)
      return &x;
  return nullptr;
}

std::string ratio(const CaseResult &r, const ImplResult *x) {
  if (!x || r.impls.empty() || r.impls[0].runs == 0)
    return "-";
  char buf[32];
  const double v = x->seconds / r.impls[0].seconds;
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0fx" : v >= 10 ? "%.1fx" : "%.2fx", v);
  return buf;
}

std::string jsonString(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if ((unsigned char)c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

std::string jsonNumber(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

} // namespace

void printSummary(const std::vector<CaseResult> &results, const RunInfo &info) {
  const bool torch = !info.torchVersion.empty();
  std::printf("== summary: %s, %d threads, fp32 FMA peak %.1f GFLOP/s (%s; 1 thread %.1f)\n",
              info.cpu.c_str(), info.peak.threads, info.peak.gflops, info.peak.isa.c_str(),
              info.peak.gflops1);
  std::printf("   speedups are t(baseline) / t(attnc auto), measured in this run; load average "
              "%.2f at the start, "
              "%.2f at the end\n",
              info.loadStart, info.loadEnd);
  std::printf("%-20s %-30s %-5s %-6s %10s %14s %6s %9s %9s", "variant", "shape", "dtype", "bound",
              "attnc ms", "rate", "%peak", "vs naive", "vs none");
  if (torch)
    std::printf(" %9s", "vs torch");
  std::printf("  other\n");
  for (const CaseResult &r : results) {
    const ImplResult &k = r.impls[0];
    std::string rate = "-", peak = "-", ms = "-";
    if (r.agree && k.runs > 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.3f", k.seconds * 1e3);
      ms = buf;
      if (r.memoryBound)
        std::snprintf(buf, sizeof buf, "%.2f GB/s", r.bytes / k.seconds * 1e-9);
      else
        std::snprintf(buf, sizeof buf, "%.2f GFLOP/s", r.flops / k.seconds * 1e-9);
      rate = buf;
      std::snprintf(buf, sizeof buf, "%.1f%%", 100 * r.flops / k.seconds * 1e-9 / info.peak.gflops);
      peak = buf;
    }
    std::string other;
    for (const ImplResult &x : r.impls) {
      if ((x.kind == "schedule" || x.kind == "cpp") && x.runs > 0)
        other += (other.empty() ? "" : ", ") + x.name + " " + ratio(r, &x);
      if (x.sameAsAuto)
        other += (other.empty() ? "" : ", ") + x.name + " = auto";
    }
    if (r.vsUnmasked > 0) {
      char buf[120];
      std::snprintf(buf, sizeof buf, "%stime / %s's %.2f", other.empty() ? "" : "; ",
                    r.unmaskedName.c_str(), r.vsUnmasked);
      other += buf;
      // One online softmax whose tiles are the unmasked kernel's (the same default tiles): the
      // time per visited tile against the unmasked kernel's, which visits them all.
      if (r.tiles.size() == 1 && r.tiles[0].visited > 0 && r.tiles[0].visited < r.tiles[0].total) {
        std::snprintf(buf, sizeof buf, "; per visited tile %.2f",
                      r.vsUnmasked * r.tiles[0].total / r.tiles[0].visited);
        other += buf;
      }
    }
    for (const TileCount &t : r.tiles)
      if (t.visited < t.total) {
        char buf[80];
        std::snprintf(buf, sizeof buf, "%skey tiles visited %.1f%%", other.empty() ? "" : "; ",
                      100.0 * t.visited / t.total);
        other += buf;
      }
    if (!r.agree)
      other = "DISAGREES with the reference: not timed";
    std::printf("%-20s %-30s %-5s %-6s %10s %14s %6s %9s %9s", r.variant.c_str(), r.shape.c_str(),
                r.dtype.c_str(), r.memoryBound ? "memory" : "compute", ms.c_str(), rate.c_str(),
                peak.c_str(), ratio(r, find(r, "reference")).c_str(),
                ratio(r, find(r, "unscheduled")).c_str());
    if (torch)
      std::printf(" %9s", ratio(r, find(r, "torch")).c_str());
    std::printf("  %s\n", other.c_str());
  }
}

bool writeJson(const std::string &path, const std::vector<CaseResult> &results, const RunInfo &info,
               std::string *err) {
  std::ostringstream j;
  j << "{\n  \"machine\": {\"cpu\": " << jsonString(info.cpu) << ", \"cores\": " << info.cores
    << ", \"load_start\": " << jsonNumber(info.loadStart)
    << ", \"load_end\": " << jsonNumber(info.loadEnd) << "},\n";
  j << "  \"fma_peak\": {\"isa\": " << jsonString(info.peak.isa)
    << ", \"lanes\": " << info.peak.lanes << ", \"threads\": " << info.peak.threads
    << ", \"gflops\": " << jsonNumber(info.peak.gflops)
    << ", \"gflops_1thread\": " << jsonNumber(info.peak.gflops1) << "},\n";
  j << "  \"options\": {\"reps\": " << info.options.reps
    << ", \"quick\": " << (info.options.quick ? "true" : "false")
    << ", \"budget_s\": " << jsonNumber(info.options.budget) << "},\n";
  j << "  \"torch\": " << (info.torchVersion.empty() ? "null" : jsonString(info.torchVersion))
    << ",\n";
  j << "  \"cases\": [";
  for (size_t ci = 0; ci < results.size(); ++ci) {
    const CaseResult &r = results[ci];
    j << (ci ? "," : "") << "\n    {\"variant\": " << jsonString(r.variant)
      << ", \"shape\": " << jsonString(r.shape) << ", \"dtype\": " << jsonString(r.dtype)
      << ", \"bound\": " << jsonString(r.memoryBound ? "memory" : "compute")
      << ", \"flop_formula\": " << jsonString(r.flopFormula)
      << ", \"flops\": " << jsonNumber(r.flops) << ", \"bytes\": " << jsonNumber(r.bytes)
      << ", \"tolerance\": " << jsonNumber(r.tolerance)
      << ", \"agree\": " << (r.agree ? "true" : "false")
      << ", \"load_before\": " << jsonNumber(r.loadBefore)
      << ", \"load_after\": " << jsonNumber(r.loadAfter)
      << ", \"unmasked\": " << (r.unmaskedName.empty() ? "null" : jsonString(r.unmaskedName))
      << ", \"vs_unmasked\": " << (r.vsUnmasked > 0 ? jsonNumber(r.vsUnmasked) : "null")
      << ",\n     \"tiles\": [";
    for (size_t i = 0; i < r.tiles.size(); ++i) {
      const TileCount &t = r.tiles[i];
      j << (i ? ", " : "") << "{\"output\": " << jsonString(t.output) << ", \"tile\": " << t.tile
        << ", \"rows_per_block\": " << t.rowsPerBlock << ", \"visited\": " << t.visited
        << ", \"mask_tested\": " << t.maskTested << ", \"total\": " << t.total << "}";
    }
    j << "], \"tile_error\": " << (r.tileError.empty() ? "null" : jsonString(r.tileError))
      << ",\n     \"notes\": [";
    for (size_t i = 0; i < r.notes.size(); ++i)
      j << (i ? ", " : "") << jsonString(r.notes[i]);
    j << "],\n     \"impls\": [";
    const double base = r.impls.empty() ? 0 : r.impls[0].seconds;
    for (size_t i = 0; i < r.impls.size(); ++i) {
      const ImplResult &x = r.impls[i];
      const bool timed = x.runs > 0;
      j << (i ? "," : "") << "\n       {\"name\": " << jsonString(x.name)
        << ", \"kind\": " << jsonString(x.kind) << ", \"threads\": " << jsonString(x.threads)
        << ", \"max_abs_diff\": " << (x.maxDiff >= 0 ? jsonNumber(x.maxDiff) : "null")
        << ", \"median_s\": " << (timed ? jsonNumber(x.seconds) : "null")
        << ", \"runs\": " << x.runs
        << ", \"gflops\": " << (timed ? jsonNumber(r.flops / x.seconds * 1e-9) : "null")
        << ", \"gbs\": " << (timed ? jsonNumber(r.bytes / x.seconds * 1e-9) : "null")
        << ", \"pct_peak\": "
        << (timed && info.peak.gflops > 0
                ? jsonNumber(100 * r.flops / x.seconds * 1e-9 / info.peak.gflops)
                : "null")
        << ", \"vs_attnc\": " << (timed && base > 0 ? jsonNumber(x.seconds / base) : "null")
        << ", \"same_as_auto\": " << (x.sameAsAuto ? "true" : "false")
        << ", \"note\": " << jsonString(x.note) << "}";
    }
    j << "]}";
  }
  j << "\n  ]\n}\n";
  attnc::Status st = attnc::write_file(path, j.str());
  if (!st.ok())
    *err = st.message();
  return st.ok();
}

} // namespace attn_bench
