// Unit tests for the tuning database's merge and its locked update by concurrent writers.
#include "attnc/TuningDb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace attnc {
namespace {

namespace fs = std::filesystem;

TuningEntry entry(const std::string &variant, std::map<std::string, double> tried,
                  const std::string &machine = "m") {
  TuningEntry e;
  e.variant = variant, e.target = "x86-64-linux", e.bucket = "N=64", e.rule = "cpu-online",
  e.machine = machine;
  e.tried = std::move(tried);
  return e;
}

TEST(TuningDbMerge, KeepsTheMeasurementsOfBothRuns) {
  TuningDb disk;
  disk.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=0;", 2.0}, {"tile=64;", 1.5}}));
  disk.entries[0].params = {{"online.score_rows", 4}};
  disk.entries[0].timeMs = 1.5;
  TuningEntry mine = entry("sdpa.attn:sdpa", {{"tile=0;", 2.1}, {"tile=256;", 1.8}});
  disk.merge(mine, MergeOptions{});
  ASSERT_EQ(disk.entries.size(), 1u);
  const TuningEntry &e = disk.entries[0];
  EXPECT_EQ(e.tried, (std::map<std::string, double>{
                         {"tile=0;", 2.1}, {"tile=64;", 1.5}, {"tile=256;", 1.8}}));
  // Only a finished run replaces the result another run left.
  EXPECT_EQ(e.params, (std::map<std::string, int>{{"online.score_rows", 4}}));
  EXPECT_EQ(e.timeMs, 1.5);
  mine.params = {{"online.score_rows", 8}};
  mine.timeMs = 1.2;
  MergeOptions result;
  result.result = true;
  disk.merge(mine, result);
  EXPECT_EQ(disk.entries[0].params, (std::map<std::string, int>{{"online.score_rows", 8}}));
  EXPECT_EQ(disk.entries[0].timeMs, 1.2);
  // Another kernel's entry is added beside it.
  disk.merge(entry("mhsa.attn:mhsa", {}), MergeOptions{});
  EXPECT_EQ(disk.entries.size(), 2u);
}

TEST(TuningDbMerge, DropsMeasurementsFromAnotherMachineOrARestart) {
  TuningDb disk;
  disk.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=64;", 1.5}}, "other machine"));
  disk.merge(entry("sdpa.attn:sdpa", {{"tile=0;", 2.0}}), MergeOptions{});
  EXPECT_EQ(disk.entries[0].tried, (std::map<std::string, double>{{"tile=0;", 2.0}}));
  EXPECT_EQ(disk.entries[0].machine, "m");
  MergeOptions restart;
  restart.forgetMeasurements = true;
  disk.merge(entry("sdpa.attn:sdpa", {{"tile=256;", 1.0}}), restart);
  EXPECT_EQ(disk.entries[0].tried, (std::map<std::string, double>{{"tile=256;", 1.0}}));
}

// Two processes, as two attn-tune runs on one database, each updating it many times: every
// update of both must be there at the end (without the lock and the re-read under it, the last
// writer's view wins).
TEST(TuningDbMerge, DropsMeasurementsOfAnotherSpaceOrAttnc) {
  TuningDb disk;
  disk.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=0;", 2.0}, {"tile=64;", 1.5}}));
  disk.entries[0].space = "cpu-online/1/aaaa";
  TuningEntry mine = entry("sdpa.attn:sdpa", {{"tile=0;", 2.1}});
  mine.space = "cpu-online/1/bbbb";
  disk.merge(mine, MergeOptions{});
  EXPECT_EQ(disk.entries[0].tried, (std::map<std::string, double>{{"tile=0;", 2.1}}));
  EXPECT_EQ(disk.entries[0].space, "cpu-online/1/bbbb");
  mine.attncVersion = "9.9.9";
  mine.tried = {{"tile=256;", 1.0}};
  disk.merge(mine, MergeOptions{});
  EXPECT_EQ(disk.entries[0].tried, (std::map<std::string, double>{{"tile=256;", 1.0}}));
}

TEST(TuningDbCombine, PoolsShardsAndTakesTheFastest) {
  TuningDb a, b;
  a.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=0;", 2.0}, {"tile=64;", 1.5}}));
  b.entries.push_back(
      entry("sdpa.attn:sdpa", {{"tile=0;", 2.2}, {"tile=256;online.score_rows=4", 1.2}}));
  b.entries.push_back(entry("causal.attn:causal", {{"tile=0;", 3.0}, {"tile=64;", 4.0}}));
  a.entries[0].updated = "2026-01-01T00:00:00Z", b.entries[0].updated = "2026-01-02T00:00:00Z";
  std::string err;
  ASSERT_TRUE(a.combine(b, "b.json", &err)) << err;
  ASSERT_EQ(a.entries.size(), 2u);
  const TuningEntry &e = a.entries[0];
  // Both measured the default: the later shard's time.
  EXPECT_EQ(e.tried,
            (std::map<std::string, double>{
                {"tile=0;", 2.2}, {"tile=64;", 1.5}, {"tile=256;online.score_rows=4", 1.2}}));
  EXPECT_EQ(e.onlineTile, 256);
  EXPECT_EQ(e.params, (std::map<std::string, int>{{"online.score_rows", 4}}));
  EXPECT_EQ(e.timeMs, 1.2);
  EXPECT_EQ(e.defaultMs, 2.2);
  // Nothing beat the default: the result is the default.
  EXPECT_EQ(a.entries[1].onlineTile, 0);
  EXPECT_TRUE(a.entries[1].params.empty());
  EXPECT_EQ(a.entries[1].timeMs, 3.0);
}

TEST(TuningDbCombine, RefusesShardsMeasuredUnderOtherConditions) {
  for (int what = 0; what < 4; ++what) {
    TuningDb a, b;
    a.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=0;", 2.0}}));
    b.entries.push_back(entry("sdpa.attn:sdpa", {{"tile=64;", 1.0}}));
    TuningEntry &e = b.entries[0];
    (what == 0 ? e.machine : what == 1 ? e.rule : what == 2 ? e.space : e.attncVersion) = "other";
    std::string err;
    EXPECT_FALSE(a.combine(b, "b.json", &err));
    EXPECT_THAT(err,
                ::testing::HasSubstr("b.json: sdpa.attn:sdpa [N=64] on x86-64-linux was measured"));
    EXPECT_THAT(err, ::testing::HasSubstr("'other'"));
  }
}

// A kernel built with -D f32=bf16 (or f16) is another kernel: tuned under its own key.
TEST(TuningDbVariantKey, NamesTheStorageType) {
  EXPECT_EQ(tuningVariantKey("dir/sdpa.attn", "sdpa"), "sdpa.attn:sdpa");
  EXPECT_EQ(tuningVariantKey("sdpa.attn", "sdpa", {{"w", "3"}, {"f32", "bf16"}}),
            "sdpa.attn:sdpa@bf16");
  EXPECT_EQ(tuningVariantKey("sdpa.attn", "sdpa", {{"f32", "bf16"}, {"f32", "f16"}}),
            "sdpa.attn:sdpa@f16"); // the last -D wins, as in Sema
  EXPECT_EQ(tuningVariantKey("sdpa.attn", "sdpa", {{"f32", "f32"}}), "sdpa.attn:sdpa");
}

TEST(TuningDbConfigKey, RoundTrips) {
  int tile = -1;
  std::map<std::string, int> params;
  const std::map<std::string, int> p = {{"online.score_rows", 4}, {"online.value_keys", 64}};
  ASSERT_TRUE(parseConfigKey(configKey(256, p), &tile, &params));
  EXPECT_EQ(tile, 256);
  EXPECT_EQ(params, p);
  ASSERT_TRUE(parseConfigKey("tile=0;", &tile, &params));
  EXPECT_EQ(tile, 0);
  EXPECT_TRUE(params.empty());
  for (const char *bad : {"", "tile=;", "tile=64", "tile=x;", "tile=64;a", "tile=64;a=b",
                          "tile=64;=3", "tile=64;b=1,a=2", "tile=064;"})
    EXPECT_FALSE(parseConfigKey(bad, &tile, &params)) << bad;
}

TEST(TuningDbUpdate, ConcurrentWritersKeepEveryChange) {
  std::string tmpl = ::testing::TempDir();
  if (tmpl.empty() || tmpl.back() != '/')
    tmpl += '/';
  tmpl += "attnc_tuning_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
  const std::string dir = tmpl, db = dir + "/attnc-tuning.json";
  constexpr int kUpdates = 25;
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0; i < kUpdates; ++i) {
        std::string key = "w" + std::to_string(w) + "." + std::to_string(i), err;
        bool ok = TuningDb::update(
            db,
            [&](TuningDb &disk) {
              disk.merge(entry(key + ".attn:k", {}), MergeOptions{});
              disk.merge(entry("shared.attn:k", {{key, 1.0}}), MergeOptions{});
            },
            &err);
        if (!ok) {
          fprintf(stderr, "writer %d: %s\n", w, err.c_str());
          _exit(1);
        }
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  TuningDb result;
  std::string err;
  ASSERT_TRUE(TuningDb::load(db, &result, &err)) << err;
  EXPECT_EQ(result.entries.size(), 2u * kUpdates + 1);
  const TuningEntry *shared = result.find("shared.attn:k", "x86-64-linux", "N=64");
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(shared->tried.size(), 2u * kUpdates);
  // The lock file stays (removing it would race with a waiting writer); no temporary does.
  std::vector<std::string> files;
  for (const auto &e : fs::directory_iterator(dir))
    files.push_back(e.path().filename().string());
  EXPECT_THAT(files,
              ::testing::UnorderedElementsAre("attnc-tuning.json", "attnc-tuning.json.lock"));
  fs::remove_all(dir);
}

} // namespace
} // namespace attnc
