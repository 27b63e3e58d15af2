// The Halide runtime functions attnc replaces in every program that links it: errors and heap buffers.
#include "halide_hooks.h"

#include "attnc/runtime.h"

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace attnc {
namespace {
// Halide's own halide_error prints the message and aborts the process. The definition below
// replaces it (Halide's is weak), so a failing kernel returns its error code and call() reports
// the message as a Status instead. Errors raised on Halide's worker threads land in the shared
// copy.
thread_local std::string t_last_halide_error;
std::mutex g_halide_error_mutex;
std::string g_last_halide_error;

// Kernels allocate the buffers of their root definitions (a projection's output, K's transposed
// copy, a feature map) with halide_malloc on every call, and free them before returning. Halide's
// default takes them from glibc's malloc, which maps a block of 128 KiB or more afresh (or grows
// the heap, then trims it again on free): every call then pays the page faults of first touch and
// the unmapping. linear_attention at B1 H8 N256 D64 (AMD EPYC Zen 4, 2 threads, 2026-12-02), a
// process calling it alone: 0.85-0.92 ms that way, 0.34-0.38 ms with the blocks kept (medians of
// 400 calls; Halide's profiler put 38% of the time in halide_free and most of the rest in first
// touches); sdpa N256 1.83 -> 1.58 ms, large shapes unchanged. So blocks
// of kCachedMin bytes or more are kept for reuse, up to a limit; smaller ones go straight to
// malloc, whose bins serve them without the kernel's involvement.
constexpr size_t kAlignment = 128; // at least Halide's halide_malloc alignment for any x86 target
constexpr size_t kCachedMin = size_t(64) << 10;
constexpr size_t kCacheGranule = size_t(4) << 10; // (a page: sizes differing within one share)

#if defined(__SANITIZE_ADDRESS__)
// Under AddressSanitizer every buffer is freed at once, so that a kernel's use after free or
// overflow into a kept block is still caught.
constexpr size_t kDefaultCacheLimit = 0;
#else
constexpr size_t kDefaultCacheLimit = size_t(256) << 20;
#endif

// What precedes each block handed out: the pointer malloc returned and the block's usable size
// (0: not cached, freed at once).
struct Header {
  void *raw;
  size_t size;
};
static_assert(sizeof(Header) <= kAlignment, "the header must fit in the alignment padding");

class BlockCache {
public:
  void *allocate(size_t bytes) {
    if (bytes > SIZE_MAX / 2)
      return nullptr;
    size_t size = 0;
    if (bytes >= kCachedMin) {
      size = (bytes + kCacheGranule - 1) / kCacheGranule * kCacheGranule;
      std::lock_guard<std::mutex> lock(mutex_);
      // The smallest kept block that fits, but not one more than twice the request: a small
      // buffer must not pin a large block another call will ask for.
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i)
        if (free_[i].size >= size && free_[i].size <= 2 * size &&
            (best == free_.size() || free_[i].size < free_[best].size))
          best = i;
      if (best != free_.size()) {
        Header h = free_[best];
        free_.erase(free_.begin() + best);
        cached_ -= h.size;
        return place(h);
      }
    }
    void *raw = std::malloc((size ? size : bytes) + kAlignment);
    if (!raw)
      return nullptr;
    return place({raw, size});
  }

  void release(void *p) {
    if (!p)
      return;
    Header h = reinterpret_cast<Header *>(p)[-1];
    std::vector<void *> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (h.size != 0 && h.size <= limit_) {
        free_.push_back(h);
        cached_ += h.size;
        h.raw = nullptr;
      }
      evict(&dropped);
    }
    std::free(h.raw);
    for (void *raw : dropped)
      std::free(raw);
  }

  void set_limit(size_t bytes) {
    std::vector<void *> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      limit_ = bytes;
      evict(&dropped);
    }
    for (void *raw : dropped)
      std::free(raw);
  }

  size_t limit() {
    std::lock_guard<std::mutex> lock(mutex_);
    return limit_;
  }

  size_t cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cached_;
  }

private:
  static void *place(Header h) {
    uintptr_t p = (reinterpret_cast<uintptr_t>(h.raw) + kAlignment) & ~(uintptr_t)(kAlignment - 1);
    reinterpret_cast<Header *>(p)[-1] = h;
    return reinterpret_cast<void *>(p);
  }

  // Drops kept blocks, oldest first (what calls no longer ask for goes before what they reuse),
  // until the cache is within its limit; the caller frees them after unlocking.
  void evict(std::vector<void *> *dropped) {
    size_t n = 0;
    while (cached_ > limit_ && n < free_.size()) {
      cached_ -= free_[n].size;
      dropped->push_back(free_[n++].raw);
    }
    free_.erase(free_.begin(), free_.begin() + n);
  }

  std::mutex mutex_;
  std::vector<Header> free_;
  size_t cached_ = 0;
  size_t limit_ = kDefaultCacheLimit;
};

// Never destroyed: Halide's worker threads may free buffers while the process exits.
BlockCache &cache() {
  static BlockCache *c = new BlockCache;
  return *c;
}
} // namespace

void *buffer_alloc(size_t bytes) { return cache().allocate(bytes); }

void buffer_free(void *p) { cache().release(p); }

void set_buffer_cache_limit(size_t bytes) { cache().set_limit(bytes); }

size_t buffer_cache_limit() { return cache().limit(); }

size_t buffer_cache_bytes() { return cache().cached(); }

namespace detail {
void clear_halide_error() {
  t_last_halide_error.clear();
  std::lock_guard<std::mutex> lock(g_halide_error_mutex);
  g_last_halide_error.clear();
}

std::string last_halide_error() {
  if (!t_last_halide_error.empty())
    return t_last_halide_error;
  std::lock_guard<std::mutex> lock(g_halide_error_mutex);
  return g_last_halide_error;
}
} // namespace detail
} // namespace attnc

extern "C" void halide_error(void * /*user_context*/, const char *msg) {
  std::string m = msg ? msg : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
    m.pop_back();
  attnc::t_last_halide_error = m;
  std::lock_guard<std::mutex> lock(attnc::g_halide_error_mutex);
  attnc::g_last_halide_error = m;
}

// Halide's are weak; these serve every AOT kernel linked into the program.
extern "C" void *halide_malloc(void * /*user_context*/, size_t bytes) {
  return attnc::buffer_alloc(bytes);
}

extern "C" void halide_free(void * /*user_context*/, void *p) { attnc::buffer_free(p); }
