// What the signal handlers remove (output.cpp's registry), shared with signals.cpp; private to attnc_runtime.
#pragma once

#include <atomic>
#include <string>

namespace attnc::detail {

// Registers a temporary file ('f') or directory ('d') for removal on a signal; returns its slot,
// or -1 when the registry is full (the path is then not removed on a signal, the worst that
// happens).
int track(const std::string &path, char kind);
void untrack(int slot);
// Frees the slots of directories that no longer exist (ones Halide made and removed itself).
void untrack_removed_dirs();
// Removes everything registered, with async-signal-safe calls only.
void remove_tracked();
// Removes everything registered, then ends the process by `sig` (status 128+N in a shell).
[[noreturn]] void die(int sig);

// While a commit renames its files (g_defer > 0), a signal is only recorded in g_pending and
// acted on once the renames are done, so that a set of files is never half in place.
extern std::atomic<int> g_defer;
extern std::atomic<int> g_pending;
// Set while TempDir calls mkdtemp: it registers its directory itself.
extern thread_local bool t_own_temp_dir;

// Holds the signals back (g_defer) for its lifetime, then acts on one that came meanwhile: around
// a commit's renames, and between creating a temporary directory and registering it, where a
// signal would otherwise leave the directory behind.
class DeferSignals {
public:
  DeferSignals() { ++g_defer; }
  ~DeferSignals() {
    if (--g_defer == 0) {
      if (int sig = g_pending.exchange(0))
        die(sig);
    }
  }
  DeferSignals(const DeferSignals &) = delete;
  DeferSignals &operator=(const DeferSignals &) = delete;
};

} // namespace attnc::detail
