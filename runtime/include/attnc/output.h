// Safe output files for attnc's tools and the .npy writer: checked targets, all-or-nothing commits, cleanup when interrupted.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "attnc/runtime.h"

namespace attnc {

// The files one run writes, put in place together or not at all.
//
// Every target is declared with add() and checked against the files the run reads (protect())
// and against the other targets before any work, by st_dev/st_ino, so that hard and symbolic
// links are caught as well as other spellings of a path. Bytes then go to a temporary with a
// unique name beside each target (append()), and commit() renames them all into place; on any
// failure it removes every temporary and leaves each old file as it was. A symbolic link is
// written through (its target is replaced, the link kept). An existing target that is not a
// regular file (/dev/null, a FIFO, a terminal) is opened and written in place at commit, never
// replaced. An uncommitted set removes its temporaries when destroyed, and
// install_cleanup_handlers() removes them when the process is interrupted.
class OutputSet {
public:
  OutputSet() = default;
  OutputSet(const OutputSet &) = delete;
  OutputSet &operator=(const OutputSet &) = delete;
  ~OutputSet();

  // Declares output `path` and gives its index. Refused, with nothing written: a directory, a
  // link to a missing file, a file in a missing directory, a protected file, or the file of
  // another output of this set (unless both are devices or FIFOs, which are only written to).
  // `label` names the output in messages ("output 'o'"); it may be empty.
  Status add(const std::string &path, const std::string &label, size_t *index);
  // A file the run reads, which no output may be. `role` names it in messages ("the input
  // file"). Files that do not exist or are not regular files cannot be lost and are ignored.
  Status protect(const std::string &path, const std::string &role);

  const std::string &path(size_t index) const;
  // Appends bytes to output `index`. A failure discards the whole set.
  Status append(size_t index, const void *data, size_t size);
  Status append(size_t index, const std::string &data) {
    return append(index, data.data(), data.size());
  }
  // Puts every output in place (each temporary flushed to disk first), or none of them.
  Status commit();
  // Removes the temporaries written so far.
  void discard();

private:
  struct FileId {
    bool exists = false;
    dev_t dev = 0;
    ino_t ino = 0;
    std::string path; // a new file's absolute, normalised path
    bool same(const FileId &o) const;
  };
  struct Target {
    std::string path, resolved, label; // resolved: what is written (a link's target)
    FileId id;
    bool stream = false; // an existing non-regular file, written in place
    mode_t mode = 0;     // the replaced file's permissions, which its successor keeps
    std::string tmp, backup;
    int fd = -1, slot = -1;
    std::string buffer; // a stream's bytes until commit
  };
  struct Protected {
    std::string path, role;
    FileId id;
  };
  Status open_temp(Target &t);
  Status fail(const Target &t, const std::string &why);

  std::vector<Target> targets_;
  std::vector<Protected> protected_;
  Status failed_ = Status::Ok();
};

// One file written through an OutputSet: a checked target, a unique temporary, a rename.
Status write_file(const std::string &path, const std::string &data);

// A private temporary directory, removed with its contents when destroyed or when the process is
// interrupted (install_cleanup_handlers).
class TempDir {
public:
  TempDir() = default;
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  ~TempDir() { remove(); }

  // Creates <temporary directory>/<prefix>.XXXXXX: $TMPDIR's, else /tmp.
  Status create(const std::string &prefix);
  const std::string &path() const { return path_; }
  void remove();

private:
  std::string path_;
  int slot_ = -1;
};

// For tools, once at the start of main (the runtime never installs handlers by itself): SIGINT,
// SIGTERM and SIGHUP remove the temporaries and temporary directories in flight (TempDirs, and
// Halide's own /tmp/XXXXXX directories), then end the process by the same signal (status 128+N
// in a shell); while a commit renames its files they wait until it is done. A signal the caller
// ignores (nohup, a background job) stays ignored. SIGXFSZ is ignored, so that a write beyond the
// file size limit fails with an error naming the file instead of killing the process. Linking
// this function into a program also links runtime/src/signals.cpp's mkdtemp, which registers
// Halide's directories.
void install_cleanup_handlers();

} // namespace attnc
