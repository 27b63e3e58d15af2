// The tuning database (attnc-tuning.json): load, look up, update and save attn-tune's results.
#include "attnc/TuningDb.h"
#include "attnc/output.h"

#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/FrontEnd.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace attnc {
namespace json = llvm::json;

namespace {

constexpr const char *kFormat = "attnc-tuning-db";
constexpr int64_t kVersion = 1;
// Far above what attn-tune writes (a few KiB per kernel and bucket).
constexpr size_t kMaxTuningDbBytes = 64u << 20;

bool fail(std::string *err, const std::string &path, const std::string &what) {
  *err = path + ": " + what;
  return false;
}

} // namespace

std::string bucketOf(const std::map<std::string, int64_t> &sizes) {
  std::string s;
  for (const auto &[name, v] : sizes) {
    int64_t b = 1;
    while (b < v && b < (int64_t(1) << 40))
      b <<= 1;
    s += (s.empty() ? "" : ",") + name + "=" + std::to_string(b);
  }
  return s;
}

std::string configKey(int onlineTile, const std::map<std::string, int> &params) {
  std::string s = "tile=" + std::to_string(onlineTile) + ";";
  bool first = true;
  for (const auto &[k, v] : params) {
    s += (first ? "" : ",") + k + "=" + std::to_string(v);
    first = false;
  }
  return s;
}

bool parseConfigKey(const std::string &key, int *onlineTile, std::map<std::string, int> *params) {
  params->clear();
  size_t semi = key.find(';');
  if (key.rfind("tile=", 0) != 0 || semi == std::string::npos)
    return false;
  try {
    size_t used = 0;
    *onlineTile = std::stoi(key.substr(5, semi - 5), &used);
    if (used != semi - 5)
      return false;
    std::stringstream rest(key.substr(semi + 1));
    std::string kv;
    while (std::getline(rest, kv, ',')) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return false;
      (*params)[kv.substr(0, eq)] = std::stoi(kv.substr(eq + 1), &used);
      if (used != kv.size() - eq - 1)
        return false;
    }
  } catch (const std::exception &) {
    return false;
  }
  return configKey(*onlineTile, *params) == key;
}

std::string tuningMachineName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  const std::string threads = std::to_string(std::thread::hardware_concurrency()) + " threads";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      size_t c = line.find(':');
      return (c == std::string::npos ? line : line.substr(c + 2)) + ", " + threads;
    }
  return "unknown CPU, " + threads;
}

const char *attncVersion() { return ATTNC_VERSION; }

std::string tuningVariantKey(const std::string &source, const std::string &kernel,
                             const std::vector<std::pair<std::string, std::string>> &defines) {
  std::string storage = "f32";
  for (const auto &[name, value] : defines)
    if (name == "f32")
      storage = value;
  return source.substr(source.find_last_of('/') + 1) + ":" + kernel +
         (storage == "f32" ? "" : "@" + storage);
}

std::string defaultTuningDbPath(const std::string &source) {
  size_t slash = source.find_last_of('/');
  return (slash == std::string::npos ? std::string() : source.substr(0, slash + 1)) +
         "attnc-tuning.json";
}

bool TuningDb::load(const std::string &path, TuningDb *out, std::string *err) {
  out->entries.clear();
  // Read as attnc reads sources: never a FIFO or a device, and never without bound.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec)
    return true; // no database yet
  std::string text, why;
  if (!dsl::readRegularFile(path, kMaxTuningDbBytes, &text, &why))
    return fail(err, path, "cannot read the tuning database: " + why);
  auto parsed = json::parse(text);
  if (!parsed)
    return fail(err, path, "not JSON: " + llvm::toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return fail(err, path, "a tuning database is a JSON object");
  auto format = root->getString("format");
  if (!format || *format != kFormat)
    return fail(err, path,
                std::string("not an attnc tuning database (\"format\" is not \"") + kFormat +
                    "\")");
  auto version = root->getInteger("version");
  if (!version || *version != kVersion)
    return fail(err, path,
                "tuning database version " +
                    (version ? std::to_string(*version) : std::string("missing")) +
                    ", this attnc reads version " + std::to_string(kVersion));
  const json::Array *entries = root->getArray("entries");
  if (!entries)
    return fail(err, path, "\"entries\" must be an array");
  for (size_t n = 0; n < entries->size(); ++n) {
    const json::Object *o = (*entries)[n].getAsObject();
    std::string where = "entry " + std::to_string(n) + ": ";
    if (!o)
      return fail(err, path, where + "not an object");
    TuningEntry e;
    auto str = [&](const char *key, std::string *v, bool required) {
      auto s = o->getString(key);
      if (s)
        *v = s->str();
      return s.has_value() || !required;
    };
    if (!str("variant", &e.variant, true) || !str("target", &e.target, true) ||
        !str("bucket", &e.bucket, true) || !str("rule", &e.rule, true))
      return fail(err, path, where + "needs string fields variant, target, bucket and rule");
    str("machine", &e.machine, false);
    str("attnc_version", &e.attncVersion, false);
    str("space", &e.space, false);
    str("updated", &e.updated, false);
    if (auto t = o->getInteger("online_tile")) {
      if (*t != 0 && (*t < kMinOnlineTile || *t > kMaxOnlineTile))
        return fail(err, path,
                    where + "online_tile must be 0 (the default) or in " +
                        std::to_string(kMinOnlineTile) + ".." + std::to_string(kMaxOnlineTile));
      e.onlineTile = (int)*t;
    }
    if (auto t = o->getNumber("time_ms"))
      e.timeMs = *t;
    if (auto t = o->getNumber("default_ms"))
      e.defaultMs = *t;
    if (const json::Object *p = o->getObject("params")) {
      for (const auto &[k, v] : *p) {
        auto i = v.getAsInteger();
        if (!i || *i < 1 || *i > 4096)
          return fail(err, path, where + "params." + k.str() + " must be an integer in 1..4096");
        e.params[k.str()] = (int)*i;
      }
    }
    if (const json::Object *p = o->getObject("sizes")) {
      for (const auto &[k, v] : *p) {
        auto i = v.getAsInteger();
        if (!i || *i < 1)
          return fail(err, path, where + "sizes." + k.str() + " must be a positive integer");
        e.sizes[k.str()] = *i;
      }
    }
    for (auto [field, map] :
         {std::pair<const char *, std::map<std::string, double> *>{"baselines", &e.baselines},
          {"tried", &e.tried}}) {
      if (const json::Object *p = o->getObject(field)) {
        for (const auto &[k, v] : *p) {
          auto d = v.getAsNumber();
          if (!d)
            return fail(err, path, where + field + "." + k.str() + " must be a number");
          (*map)[k.str()] = *d;
        }
      }
    }
    if (const json::Object *p = o->getObject("offline")) {
      for (const auto &[k, v] : *p) {
        auto str = v.getAsString();
        if (!str)
          return fail(err, path, where + "offline." + k.str() + " must be a string");
        e.offline[k.str()] = str->str();
      }
    }
    out->entries.push_back(std::move(e));
  }
  return true;
}

bool TuningDb::save(const std::string &path, std::string *err) const {
  json::Array arr;
  for (const TuningEntry &e : entries) {
    json::Object o{{"variant", e.variant},
                   {"target", e.target},
                   {"bucket", e.bucket},
                   {"rule", e.rule},
                   {"online_tile", e.onlineTile},
                   {"time_ms", e.timeMs},
                   {"default_ms", e.defaultMs},
                   {"machine", e.machine},
                   {"attnc_version", e.attncVersion},
                   {"space", e.space},
                   {"updated", e.updated}};
    json::Object sizes, params, baselines, tried;
    for (const auto &[k, v] : e.sizes)
      sizes[k] = v;
    for (const auto &[k, v] : e.params)
      params[k] = v;
    for (const auto &[k, v] : e.baselines)
      baselines[k] = v;
    for (const auto &[k, v] : e.tried)
      tried[k] = v;
    o["sizes"] = std::move(sizes);
    o["params"] = std::move(params);
    o["baselines"] = std::move(baselines);
    o["tried"] = std::move(tried);
    if (!e.offline.empty()) {
      json::Object offline;
      for (const auto &[k, v] : e.offline)
        offline[k] = v;
      o["offline"] = std::move(offline);
    }
    arr.push_back(std::move(o));
  }
  json::Value root =
      json::Object{{"format", kFormat}, {"version", kVersion}, {"entries", std::move(arr)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::formatv("{0:2}", root) << "\n";
  os.flush();
  Status st = write_file(path, text);
  if (!st.ok())
    *err = st.message();
  return st.ok();
}

bool TuningDb::update(const std::string &path, const std::function<void(TuningDb &)> &change,
                      std::string *err) {
  // The lock is a file of its own: every write replaces the database's inode, and a lock on it
  // would go with it.
  const std::string lockPath = path + ".lock";
  int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0)
    return fail(err, path, "cannot open the lock file '" + lockPath + "': " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    std::string why = std::strerror(errno);
    ::close(fd);
    return fail(err, path, "cannot lock '" + lockPath + "': " + why);
  }
  TuningDb disk;
  bool ok = load(path, &disk, err);
  if (ok) {
    change(disk);
    ok = disk.save(path, err);
  }
  ::close(fd); // and with it the lock
  return ok;
}

void TuningDb::merge(const TuningEntry &mine, const MergeOptions &opts) {
  TuningEntry *e = find(mine.variant, mine.target, mine.bucket);
  if (!e) {
    entries.push_back(mine);
    return;
  }
  const bool comparable = !opts.forgetMeasurements && e->machine == mine.machine &&
                          e->rule == mine.rule && e->space == mine.space &&
                          e->attncVersion == mine.attncVersion;
  if (!comparable) {
    e->tried.clear();
    e->baselines.clear();
    e->offline.clear();
  }
  for (const auto &[k, v] : mine.tried)
    e->tried[k] = v;
  for (const auto &[k, v] : mine.baselines)
    e->baselines[k] = v;
  for (const auto &[k, v] : mine.offline)
    e->offline[k] = v;
  e->sizes = mine.sizes, e->rule = mine.rule, e->machine = mine.machine, e->updated = mine.updated;
  e->space = mine.space, e->attncVersion = mine.attncVersion;
  if (opts.result || !comparable) {
    e->params = mine.params;
    e->onlineTile = mine.onlineTile;
    e->timeMs = mine.timeMs, e->defaultMs = mine.defaultMs;
  }
}

bool TuningDb::combine(const TuningDb &other, const std::string &otherName, std::string *err) {
  for (const TuningEntry &theirs : other.entries) {
    TuningEntry *e = find(theirs.variant, theirs.target, theirs.bucket);
    if (!e) {
      entries.push_back(theirs);
      continue;
    }
    auto differs = [&](const char *what, const std::string &a, const std::string &b) {
      *err = otherName + ": " + theirs.variant + " [" + theirs.bucket + "] on " + theirs.target +
             " was measured " + what + " ('" + b + "', here '" + a +
             "'): times taken under different conditions do not compare; merge it into another "
             "database";
      return false;
    };
    if (e->machine != theirs.machine)
      return differs("on another machine", e->machine, theirs.machine);
    if (e->rule != theirs.rule)
      return differs("for another schedule rule", e->rule, theirs.rule);
    if (e->space != theirs.space)
      return differs("in another schedule space", e->space, theirs.space);
    if (e->attncVersion != theirs.attncVersion)
      return differs("by another attnc", e->attncVersion, theirs.attncVersion);
    // A configuration both measured keeps the later run's result.
    const bool later = theirs.updated > e->updated;
    auto pool = [&](auto &mine, const auto &other) {
      for (const auto &[k, v] : other)
        if (later || !mine.count(k))
          mine[k] = v;
    };
    pool(e->tried, theirs.tried);
    pool(e->baselines, theirs.baselines);
    pool(e->offline, theirs.offline);
    if (theirs.updated > e->updated)
      e->updated = theirs.updated;
  }
  // Each pooled entry's result: the fastest configuration measured (the default's time from its
  // own measurement). Knobs the configuration leaves at their defaults are absent from `params`:
  // the rule's defaults, which the entry's schedule space fixes (a change of them is another
  // space, and attnc then ignores the entry).
  for (TuningEntry &e : entries) {
    auto dflt = e.tried.find(configKey(0, {}));
    if (dflt == e.tried.end() || dflt->second < 0)
      continue;
    std::string bestKey = dflt->first;
    double best = dflt->second;
    for (const auto &[k, ms] : e.tried)
      if (ms >= 0 && ms < best)
        best = ms, bestKey = k;
    int tile = 0;
    std::map<std::string, int> params;
    if (!parseConfigKey(bestKey, &tile, &params))
      continue;
    e.params = params, e.onlineTile = tile, e.timeMs = best, e.defaultMs = dflt->second;
  }
  return true;
}

TuningEntry *TuningDb::find(const std::string &variant, const std::string &target,
                            const std::string &bucket) {
  for (TuningEntry &e : entries)
    if (e.variant == variant && e.target == target && e.bucket == bucket)
      return &e;
  return nullptr;
}
const TuningEntry *TuningDb::find(const std::string &variant, const std::string &target,
                                  const std::string &bucket) const {
  return const_cast<TuningDb *>(this)->find(variant, target, bucket);
}

std::vector<const TuningEntry *> TuningDb::all(const std::string &variant,
                                               const std::string &target) const {
  std::vector<const TuningEntry *> r;
  for (const TuningEntry &e : entries)
    if (e.variant == variant && e.target == target)
      r.push_back(&e);
  return r;
}

TuningEntry &TuningDb::upsert(const std::string &variant, const std::string &target,
                              const std::string &bucket) {
  if (TuningEntry *e = find(variant, target, bucket))
    return *e;
  entries.push_back(TuningEntry{});
  TuningEntry &e = entries.back();
  e.variant = variant, e.target = target, e.bucket = bucket;
  return e;
}

} // namespace attnc
