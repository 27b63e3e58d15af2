// The whole front end: read a file and its imports, parse, and run Sema (see FrontEnd.h).
#include "attnc/dsl/FrontEnd.h"

#include "attnc/dsl/Parser.h"

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#ifndef ATTNC_SOURCE_STDLIB_DIR
#define ATTNC_SOURCE_STDLIB_DIR ""
#endif

namespace attnc::dsl {

namespace {

bool isDirectory(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool isFile(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string dirName(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

std::string join(const std::string &dir, const std::string &name) {
  if (dir.empty() || dir == ".")
    return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Identity of a file for "already imported": its canonical path, or the path as written.
std::string canonical(const std::string &path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf))
    return buf;
  return path;
}

// "a FIFO" for a FIFO, and so on: what `mode` is, when it is not a regular file.
std::string fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

bool readRegularFile(const std::string &path, size_t maxBytes, std::string *text,
                     std::string *why) {
  // Non-blocking, so that opening a FIFO without a writer returns at once instead of waiting.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  struct stat st;
  bool ok = fstat(fd, &st) == 0;
  if (!ok)
    *why = std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    ok = false, *why = "it is " + fileKind(st.st_mode) + ", not a regular file";
  else if ((uint64_t)st.st_size > maxBytes)
    ok = false, *why = "it is " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                       std::to_string(maxBytes);
  std::string data;
  // The size may change while reading: read at most one byte past the limit to notice.
  for (char buf[65536]; ok;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      ok = false, *why = std::strerror(errno);
    else if (n == 0)
      break;
    else if (data.size() + (size_t)n > maxBytes)
      ok = false, *why = "it is more than the limit of " + std::to_string(maxBytes) + " bytes";
    else
      data.append(buf, (size_t)n);
  }
  ::close(fd);
  if (ok)
    *text = std::move(data);
  return ok;
}

std::string standardLibraryDir() {
  if (const char *env = std::getenv("ATTNC_STDLIB_DIR"); env && *env)
    return env;
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string installed = join(dirName(dirName(exe)), "share/attnc/std");
    if (isDirectory(installed))
      return installed;
  }
  return ATTNC_SOURCE_STDLIB_DIR;
}

bool loadModule(const std::string &path, const FrontEndOptions &opts, std::ostream &err,
                LoadedModule *out) {
  auto file = std::make_shared<SourceFile>();
  file->path = path;
  std::string why;
  if (!readRegularFile(path, kMaxSourceBytes, &file->text, &why)) {
    err << "error: cannot read '" << path << "': " << why << "\n";
    return false;
  }
  DiagEngine diags(file);
  std::unique_ptr<Module> m = Parser(*file, diags).parseModule(true);
  if (!m) {
    diags.print(err);
    return false;
  }

  // Imports, breadth first. A file imported twice (or in a cycle) is read once.
  std::set<std::string> seen{canonical(path)};
  struct Pending {
    Import import;
    std::string fromDir;
  };
  std::deque<Pending> work;
  for (const Import &im : m->imports)
    work.push_back({im, dirName(path)});
  const std::string stdlib = standardLibraryDir();
  while (!work.empty()) {
    Pending p = work.front();
    work.pop_front();
    std::vector<std::string> candidates;
    if (p.import.quoted) {
      candidates.push_back(p.import.spec[0] == '/' ? p.import.spec
                                                   : join(p.fromDir, p.import.spec));
    } else {
      std::string name = p.import.spec + ".attn";
      candidates.push_back(join(p.fromDir, name));
      for (const std::string &dir : opts.importPaths)
        candidates.push_back(join(dir, name));
      if (!stdlib.empty())
        candidates.push_back(join(stdlib, name));
    }
    std::string found;
    for (const std::string &c : candidates)
      if (isFile(c)) {
        found = c;
        break;
      }
    // A quoted path that exists but is no regular file (a directory, /dev/zero, a FIFO) is
    // named as such, not as missing.
    struct stat st;
    if (found.empty() && candidates.size() == 1 && stat(candidates[0].c_str(), &st) == 0) {
      diags.error(p.import.loc, "cannot import '" + candidates[0] + "': it is " +
                                    fileKind(st.st_mode) + ", not a regular file");
      continue;
    }
    if (found.empty()) {
      std::string msg = "cannot find import '" + p.import.spec + "' (looked for ";
      for (size_t i = 0; i < candidates.size(); ++i)
        msg += (i ? ", " : "") + candidates[i];
      diags.error(p.import.loc, msg + ")");
      continue;
    }
    if (!seen.insert(canonical(found)).second)
      continue;
    auto imported = std::make_shared<SourceFile>();
    imported->path = found;
    if (!readRegularFile(found, kMaxSourceBytes, &imported->text, &why)) {
      diags.error(p.import.loc, "cannot read imported file '" + found + "': " + why);
      continue;
    }
    m->files.push_back(imported);
    std::unique_ptr<Module> im = Parser(*imported, diags).parseModule(false);
    if (!im)
      continue; // the parser reported why, at a location in the imported file
    for (auto &f : im->functions)
      m->functions.push_back(std::move(f));
    for (const Import &next : im->imports)
      work.push_back({next, dirName(found)});
  }
  if (!diags.hasErrors())
    analyze(*m, diags, opts.sema);
  diags.print(err);
  if (diags.hasErrors())
    return false;
  out->file = file;
  out->module = std::move(m);
  return true;
}

} // namespace attnc::dsl
