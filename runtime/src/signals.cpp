// The tools' signal handling (install_cleanup_handlers), and the mkdtemp that registers Halide's temporary directories.
//
// Kept apart from output.cpp so that a program linking attnc_runtime for write_npy gets neither:
// the linker takes this object file only into programs that call install_cleanup_handlers.
#include "attnc/output.h"

#include "cleanup.h"

#include <dlfcn.h>
#include <signal.h>

#include <cstring>

namespace attnc {
namespace {

extern "C" void on_signal(int sig) {
  if (detail::g_defer.load() > 0) {
    detail::g_pending.store(sig);
    return;
  }
  detail::die(sig);
}

} // namespace

void install_cleanup_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  // One cleanup at a time on this thread.
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    sigaddset(&sa.sa_mask, sig);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old{};
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN)
      continue;
    ::sigaction(sig, &sa, nullptr);
  }
  ::signal(SIGXFSZ, SIG_IGN);
}

} // namespace attnc

// Halide compiles a static library through directories of its own, made by
// mkdtemp("/tmp/XXXXXX") (Halide::Internal::dir_make_temp, which takes no other
// place) and removed when it is done; a signal meanwhile would leave them
// behind. The executable's definition of mkdtemp comes before libc's for
// libHalide's calls too, so directories made from Halide's template are
// registered with the others (and only those: a directory made to be kept must
// not go), then the call goes on to libc's.
extern "C" char *mkdtemp(char *templ) {
  using Fn = char *(*)(char *);
  static Fn real = reinterpret_cast<Fn>(::dlsym(RTLD_NEXT, "mkdtemp"));
  if (real == nullptr)
    return nullptr;
  const bool halide = std::strcmp(templ, "/tmp/XXXXXX") == 0;
  // Created and registered with signals held back, or a signal in between would leave it.
  attnc::detail::DeferSignals defer;
  char *made = real(templ);
  if (made != nullptr && halide && !attnc::detail::t_own_temp_dir) {
    // Halide removes its directories itself: their slots are freed here, not by it.
    attnc::detail::untrack_removed_dirs();
    attnc::detail::track(made, 'd');
  }
  return made;
}
