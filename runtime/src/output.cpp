// Safe output files: checked targets, unique temporaries, all-or-nothing renames, and cleanup on SIGINT/SIGTERM/SIGHUP.
#include "attnc/output.h"

#include "cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace fs = std::filesystem;

namespace attnc {
namespace detail {

// ---------------------------------------------------------------------------
// What is in flight, for the signal handlers. A handler may only make
// async-signal-safe calls, so the registry is a fixed array of atomic pointers
// to C strings ('f' or 'd', then the path) rather than a container.

namespace {
constexpr int kSlots = 256;
std::atomic<char *> g_slots[kSlots];
std::atomic<bool> g_dying{false};
} // namespace

std::atomic<int> g_defer{0};
std::atomic<int> g_pending{0};
thread_local bool t_own_temp_dir = false;

int track(const std::string &path, char kind) {
  char *p = static_cast<char *>(std::malloc(path.size() + 2));
  if (p == nullptr)
    return -1;
  p[0] = kind;
  std::memcpy(p + 1, path.c_str(), path.size() + 1);
  for (int i = 0; i < kSlots; ++i) {
    char *expected = nullptr;
    if (g_slots[i].compare_exchange_strong(expected, p))
      return i;
  }
  std::free(p);
  return -1;
}

void untrack(int slot) {
  if (slot < 0)
    return;
  char *p = g_slots[slot].exchange(nullptr);
  // A handler on another thread sets g_dying before it reads the slots, so
  // when it is clear here the handler cannot be holding `p`; when it is set,
  // the process is about to end and `p` is left to it.
  if (!g_dying.load())
    std::free(p);
}

void untrack_removed_dirs() {
  for (int i = 0; i < kSlots; ++i) {
    const char *p = g_slots[i].load();
    if (p != nullptr && p[0] == 'd' && ::access(p + 1, F_OK) != 0 && errno == ENOENT)
      untrack(i);
  }
}

namespace {

// Removes a directory tree with system calls only: std::filesystem::remove_all
// and readdir allocate, which a signal handler must not. The trees are the
// tools' own temporary directories, so the depth is bounded.
void remove_tree_at(int parent, const char *name, int depth) {
  if (::unlinkat(parent, name, 0) == 0 || (errno != EISDIR && errno != EPERM) || depth > 16)
    return;
#ifdef SYS_getdents64
  int fd = ::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    // Entries removed while reading may make the kernel skip others: read
    // again until a pass finds nothing.
    for (int pass = 0; pass < 4; ++pass) {
      bool removed = false;
      ::lseek(fd, 0, SEEK_SET);
      alignas(8) char buf[4096];
      long n;
      while ((n = ::syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
          const struct dirent64 *d = reinterpret_cast<const struct dirent64 *>(buf + off);
          off += d->d_reclen;
          if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0)
            continue;
          remove_tree_at(fd, d->d_name, depth + 1);
          removed = true;
        }
      }
      if (!removed)
        break;
    }
    ::close(fd);
  }
#endif
  ::unlinkat(parent, name, AT_REMOVEDIR);
}

} // namespace

void remove_tracked() {
  g_dying.store(true);
  for (std::atomic<char *> &slot : g_slots) {
    const char *p = slot.load();
    if (p == nullptr)
      continue;
    if (p[0] == 'f')
      ::unlink(p + 1);
    else
      remove_tree_at(AT_FDCWD, p + 1, 0);
  }
}

[[noreturn]] void die(int sig) {
  remove_tracked();
  // The conventional end: killed by the signal itself, which the parent (a
  // shell, make) sees as such.
  struct sigaction dfl{};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(sig);
  ::_exit(128 + sig);
}

} // namespace detail

namespace {

using detail::track;
using detail::untrack;

using detail::DeferSignals;

// ---------------------------------------------------------------------------

bool write_all(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t w = ::write(fd, p, size);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += w;
    size -= static_cast<size_t>(w);
  }
  return true;
}

std::string parent_dir(const std::string &path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// A name for a new file beside `path` that no other file has: `make(name)`
// creates it and fails with EEXIST while the name is taken. Hand-rolled rather
// than mkstemp, which creates the file 0600 whatever the umask: reading the
// umask back means umask(), which changes it for every thread meanwhile.
int unique_beside(const std::string &path, const char *infix, std::string *name,
                  int (*make)(const char *, void *), void *arg) {
  static std::atomic<uint64_t> counter{0};
  const std::string dir = parent_dir(path);
  // Long names would overflow NAME_MAX with the suffix; the prefix is only
  // there to show a person whose temporary it is.
  const std::string base = fs::path(path).filename().string().substr(0, 200);
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t x =
        (static_cast<uint64_t>(::getpid()) << 32) ^
        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull);
    // splitmix64's finaliser spreads the bits over the suffix.
    x ^= x >> 30, x *= 0xBF58476D1CE4E5B9ull, x ^= x >> 27, x *= 0x94D049BB133111EBull,
        x ^= x >> 31;
    static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    std::string suffix;
    for (int i = 0; i < 8; ++i, x /= 62)
      suffix += kChars[x % 62];
    *name = (fs::path(dir) / (base + infix + suffix)).string();
    int rc = make(name->c_str(), arg);
    if (rc >= 0 || errno != EEXIST)
      return rc;
  }
  return -1;
}

} // namespace

// ---------------------------------------------------------------------------
// OutputSet

bool OutputSet::FileId::same(const FileId &o) const {
  if (exists != o.exists)
    return false;
  return exists ? dev == o.dev && ino == o.ino : path == o.path;
}

OutputSet::~OutputSet() { discard(); }

const std::string &OutputSet::path(size_t index) const { return targets_.at(index).path; }

Status OutputSet::fail(const Target &t, const std::string &why) {
  failed_ = Status::Error("cannot write '" + t.path + "': " + why);
  discard();
  return failed_;
}

Status OutputSet::add(const std::string &path, const std::string &label, size_t *index) {
  auto cannot = [&](const std::string &why) {
    return Status::Error("cannot write '" + path + "': " + why);
  };
  if (path.empty())
    return Status::Error("cannot write a file with an empty name");
  Target t;
  t.path = t.resolved = path;
  t.label = label;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode))
      return cannot("it is a directory");
    t.id.exists = true, t.id.dev = st.st_dev, t.id.ino = st.st_ino;
    // Devices, FIFOs and terminals are opened by the path as given: /dev/stdout's link leads
    // to "pipe:[N]", which names no file.
    t.stream = !S_ISREG(st.st_mode);
    t.mode = st.st_mode & 0777;
  } else if (errno != ENOENT) {
    return cannot(std::strerror(errno));
  }
  if (!t.stream && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    // Renaming over the link would replace the link itself: write its target.
    if (!t.id.exists)
      return cannot("it is a symbolic link to a missing file");
    std::error_code ec;
    fs::path real = fs::canonical(path, ec);
    if (ec)
      return cannot(ec.message());
    t.resolved = real.string();
  }
  if (!t.id.exists) {
    // A new file: its directory must exist, which is better said now than
    // after the work.
    struct stat ds;
    if (::stat(parent_dir(t.resolved).c_str(), &ds) != 0)
      return cannot(std::strerror(errno));
    if (!S_ISDIR(ds.st_mode))
      return cannot(std::strerror(ENOTDIR));
    std::error_code ec;
    fs::path abs = fs::absolute(t.resolved, ec);
    t.id.path = ec ? t.resolved : fs::weakly_canonical(abs, ec).string();
    if (ec)
      t.id.path = abs.lexically_normal().string();
  }
  for (const Protected &p : protected_) {
    if (p.id.same(t.id)) {
      return Status::Error("refusing to overwrite " + p.role + " '" + p.path + "'" +
                           (label.empty() ? "" : " with " + label));
    }
  }
  for (const Target &o : targets_) {
    if (o.id.same(t.id) && !(o.stream && t.stream)) {
      auto describe = [](const Target &x) {
        return x.label.empty() ? "'" + x.path + "'" : x.label + " ('" + x.path + "')";
      };
      return Status::Error("refusing to write the same file twice: " + describe(o) + " and " +
                           describe(t));
    }
  }
  targets_.push_back(std::move(t));
  *index = targets_.size() - 1;
  return Status::Ok();
}

Status OutputSet::protect(const std::string &path, const std::string &role) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return Status::Ok();
  Protected p;
  p.path = path, p.role = role;
  p.id.exists = true, p.id.dev = st.st_dev, p.id.ino = st.st_ino;
  for (const Target &t : targets_) {
    if (t.id.same(p.id)) {
      return Status::Error("refusing to overwrite " + role + " '" + path + "'" +
                           (t.label.empty() ? "" : " with " + t.label));
    }
  }
  protected_.push_back(std::move(p));
  return Status::Ok();
}

Status OutputSet::open_temp(Target &t) {
  if (t.fd >= 0)
    return Status::Ok();
  std::string tmp;
  int fd = unique_beside(
      t.resolved, ".tmp.", &tmp,
      [](const char *name, void *slot) {
        // Registered before it exists, so that no signal can come between
        // its creation and its registration.
        *static_cast<int *>(slot) = track(name, 'f');
        int fd = ::open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
          int e = errno;
          untrack(*static_cast<int *>(slot));
          *static_cast<int *>(slot) = -1;
          errno = e;
        }
        return fd;
      },
      &t.slot);
  if (fd < 0)
    return fail(t, std::string("cannot create a temporary file: ") + std::strerror(errno));
  t.fd = fd;
  t.tmp = tmp;
  if (t.id.exists)
    ::fchmod(fd, t.mode);
  return Status::Ok();
}

Status OutputSet::append(size_t index, const void *data, size_t size) {
  if (!failed_.ok())
    return failed_;
  Target &t = targets_.at(index);
  if (t.stream) {
    t.buffer.append(static_cast<const char *>(data), size);
    return Status::Ok();
  }
  Status s = open_temp(t);
  if (!s.ok())
    return s;
  if (!write_all(t.fd, data, size))
    return fail(t, std::strerror(errno));
  return Status::Ok();
}

void OutputSet::discard() {
  for (Target &t : targets_) {
    if (t.fd >= 0)
      ::close(t.fd);
    t.fd = -1;
    if (!t.tmp.empty())
      ::unlink(t.tmp.c_str());
    t.tmp.clear();
    untrack(t.slot);
    t.slot = -1;
    t.buffer.clear();
  }
}

Status OutputSet::commit() {
  if (!failed_.ok())
    return failed_;
  // Every temporary's bytes on disk before any rename: after a crash, a
  // renamed but unwritten file would have replaced the old one with nothing.
  for (Target &t : targets_) {
    if (t.stream)
      continue;
    Status s = open_temp(t);
    if (!s.ok())
      return s;
    if (::fsync(t.fd) != 0)
      return fail(t, std::strerror(errno));
    int rc = ::close(t.fd);
    t.fd = -1;
    if (rc != 0)
      return fail(t, std::strerror(errno));
  }
  // Devices, FIFOs and terminals, in place and before any rename, so that
  // their failure (/dev/full) still leaves every file as it was. Opening a
  // FIFO waits for its reader; a signal meanwhile cleans up as anywhere.
  for (Target &t : targets_) {
    if (!t.stream)
      continue;
    int fd;
    while ((fd = ::open(t.resolved.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0 &&
           errno == EINTR) {
    }
    if (fd < 0)
      return fail(t, std::strerror(errno));
    bool ok = write_all(fd, t.buffer.data(), t.buffer.size());
    int e = errno;
    if (::close(fd) != 0 && ok)
      ok = false, e = errno;
    if (!ok)
      return fail(t, std::strerror(e));
    t.buffer.clear();
  }

  DeferSignals defer;
  std::vector<Target *> files;
  for (Target &t : targets_)
    if (!t.stream)
      files.push_back(&t);
  // With several files, a rename that fails after others succeeded must be
  // undone: each old file keeps a second name (a hard link) until the end.
  // Where links are not supported the old file cannot come back, and only
  // that file's rollback is lost.
  std::vector<bool> existed(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    struct stat st;
    existed[i] = ::lstat(files[i]->resolved.c_str(), &st) == 0;
    if (existed[i] && files.size() > 1) {
      std::string backup, target = files[i]->resolved;
      auto link = [](const char *name, void *from) {
        return ::link(static_cast<std::string *>(from)->c_str(), name);
      };
      if (unique_beside(target, ".old.", &backup, link, &target) == 0)
        files[i]->backup = backup;
    }
  }
  auto drop_backups = [&] {
    for (Target *t : files) {
      if (!t->backup.empty())
        ::unlink(t->backup.c_str());
      t->backup.clear();
    }
  };
  for (size_t i = 0; i < files.size(); ++i) {
    if (::rename(files[i]->tmp.c_str(), files[i]->resolved.c_str()) == 0)
      continue;
    const int e = errno;
    for (size_t j = 0; j < i; ++j) {
      Target *u = files[j];
      if (!u->backup.empty()) {
        if (::rename(u->backup.c_str(), u->resolved.c_str()) == 0)
          u->backup.clear();
      } else if (!existed[j]) {
        ::unlink(u->resolved.c_str());
      }
      u->tmp.clear(); // renamed: nothing of it is left to remove
    }
    drop_backups();
    return fail(*files[i], std::strerror(e));
  }
  drop_backups();
  for (Target *t : files) {
    t->tmp.clear();
    untrack(t->slot);
    t->slot = -1;
  }
  return Status::Ok();
}

Status write_file(const std::string &path, const std::string &data) {
  OutputSet out;
  size_t i = 0;
  Status s = out.add(path, "", &i);
  if (s.ok())
    s = out.append(i, data);
  if (s.ok())
    s = out.commit();
  return s;
}

// ---------------------------------------------------------------------------
// TempDir

Status TempDir::create(const std::string &prefix) {
  remove();
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec)
    base = "/tmp";
  std::string templ = (base / (prefix + ".XXXXXX")).string();
  // A signal between mkdtemp and track would leave the directory behind (seen under load by
  // cli/interrupt.test, which signals as soon as the directory appears): both happen with
  // signals held back.
  DeferSignals defer;
  // Tracked here, with the slot this TempDir frees, rather than by the tools' mkdtemp (cleanup.h).
  detail::t_own_temp_dir = true;
  char *made = ::mkdtemp(templ.data());
  detail::t_own_temp_dir = false;
  if (made == nullptr) {
    return Status::Error("cannot create a temporary directory in '" + base.string() +
                         "': " + std::strerror(errno));
  }
  path_ = templ;
  slot_ = track(path_, 'd');
  return Status::Ok();
}

void TempDir::remove() {
  if (path_.empty())
    return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  untrack(slot_);
  slot_ = -1;
  path_.clear();
}

} // namespace attnc
