// The tuning database: attn-tune's best schedule per (variant, target, shape bucket), as JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attnc {

// One tuned (variant, target, bucket). `tried` keeps every configuration measured (its key is
// configKey()), so an interrupted attn-tune run resumes where it stopped.
struct TuningEntry {
  std::string variant;                     // "<file name>:<kernel>", e.g. "sdpa.attn:sdpa"
  std::string target;                      // Halide's target string, features included
  std::string bucket;                      // bucketOf(sizes)
  std::map<std::string, int64_t> sizes;    // the sizes it was measured at
  std::string rule;                        // the schedule rule the params belong to
  std::map<std::string, int> params;       // knob values (unset knobs take the rule's defaults)
  int onlineTile = 0;                      // key tile of the online softmax (0: the pass's default)
  double timeMs = 0, defaultMs = 0;        // best and default schedule, median ms
  std::map<std::string, double> baselines; // Halide autoschedulers by name (ms; < 0: failed)
  std::map<std::string, double> tried;     // configKey -> median ms (< 0: failed to compile)
  // GPU targets without a GPU: configKey -> what ptxas reported ("regs=R spills=S smem=B" or
  // "failed: ..."), for a later run on a device to time only the configurations that fit.
  std::map<std::string, std::string> offline;
  // Where and by what it was measured: the CPU (tuningMachineName()), the attnc release
  // (attncVersion()) and the rule's schedule space (scheduleSpaceKey() in attnc/Schedule.h).
  // attnc ignores, with a note, an entry whose release or space is not its own, and, compiling
  // for the host, one measured on another CPU.
  std::string machine, attncVersion, space, updated;
};

// How TuningDb::merge combines one run's entry with the database's entry of the same key.
struct MergeOptions {
  // The run's result (params, online tile, times) replaces the database's. Without it only what
  // was measured is merged: another run's finished result stays until this run has its own.
  bool result = false;
  // The run started afresh (--restart): the database's measurements of the entry are dropped.
  bool forgetMeasurements = false;
};

struct TuningDb {
  std::vector<TuningEntry> entries;

  // Reads `path`; a missing file is an empty database. False with a message naming the file for
  // unreadable or malformed content (never a crash).
  static bool load(const std::string &path, TuningDb *out, std::string *err);
  // Writes atomically (a unique temporary beside it, then a rename; attnc/output.h), replacing
  // what is there: a database that other processes may write is changed with update().
  bool save(const std::string &path, std::string *err) const;
  // Changes the database at `path` under an exclusive lock (flock on `path`.lock, a file kept
  // beside it): re-reads it, applies `change` to what is on disk, writes it atomically. Two
  // processes updating one database both keep their changes.
  static bool update(const std::string &path, const std::function<void(TuningDb &)> &change,
                     std::string *err);
  // Merges one run's entry into the entry of the same key (added when missing). The measurements
  // of both are kept, this run's where both measured a configuration, unless the database's
  // were taken on another machine, for another rule or schedule space, or by another attnc.
  void merge(const TuningEntry &mine, const MergeOptions &opts);
  // Combines another database (a shard of one tuning job, `attn-tune --shard`) into this one:
  // entries of the same key measured on the same machine, rule, space and attnc pool their
  // measurements, and the fastest configuration measured becomes the entry's result (confirmed
  // against the default by the next unsharded attn-tune run, which resumes from them). False,
  // with `err` naming the entry, when such entries were measured under different conditions:
  // their times do not compare.
  bool combine(const TuningDb &other, const std::string &otherName, std::string *err);

  TuningEntry *find(const std::string &variant, const std::string &target,
                    const std::string &bucket);
  const TuningEntry *find(const std::string &variant, const std::string &target,
                          const std::string &bucket) const;
  // Every entry for a variant on a target, whatever its bucket.
  std::vector<const TuningEntry *> all(const std::string &variant, const std::string &target) const;
  TuningEntry &upsert(const std::string &variant, const std::string &target,
                      const std::string &bucket);
};

// Sizes rounded up to powers of two, "NAME=VALUE" sorted by name and joined by commas: shapes
// within a factor of two of each other share their tuned schedule.
std::string bucketOf(const std::map<std::string, int64_t> &sizes);

// "tile=T;knob=v,knob=v": one configuration of the search (T = 0 for the pass's default).
std::string configKey(int onlineTile, const std::map<std::string, int> &params);
// The inverse of configKey; false for text configKey does not write.
bool parseConfigKey(const std::string &key, int *onlineTile, std::map<std::string, int> *params);

// This machine as tuning entries record it: the CPU's model name and the thread count.
std::string tuningMachineName();
// attnc's release (CMakeLists.txt's project version), recorded in every entry.
const char *attncVersion();

// An entry's variant key: "<file name of source>:<kernel>", with "@bf16" or "@f16" where
// `defines` (-D, last one wins) store the kernel's f32 tensors in that type: another kernel,
// tuned apart from the f32 one.
std::string tuningVariantKey(const std::string &source, const std::string &kernel,
                             const std::vector<std::pair<std::string, std::string>> &defines = {});

// The database attnc uses for `source` when none is named: attnc-tuning.json beside it.
std::string defaultTuningDbPath(const std::string &source);

} // namespace attnc
