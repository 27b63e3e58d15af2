// libFuzzer entry point for the runtime's .npy reader (attnc::read_npy): the input is the file's bytes.
//
// Beyond crashes and leaks, the harness checks the reader's contract (runtime/include/attnc/npy.h):
// a rejection names the file first and leaves the output untouched; an accepted array has a rank
// within kMaxRank and exactly numel * itemsize bytes of data, and re-reading it gives the same.
#include "attnc/npy.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

[[noreturn]] void finding(const std::string &what) {
  std::fprintf(stderr, "fuzz_npy: FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The reader takes a path; an in-memory file reached through /proc keeps the fuzzer off the disk.
struct MemFile {
  int fd = -1;
  std::string path;
  MemFile() {
    fd = memfd_create("attnc-fuzz-npy", MFD_CLOEXEC);
    if (fd < 0)
      finding("memfd_create failed");
    path = "/proc/self/fd/" + std::to_string(fd);
  }
  void set(const uint8_t *data, size_t size) {
    if (ftruncate(fd, 0) != 0)
      finding("ftruncate failed");
    size_t done = 0;
    while (done < size) {
      ssize_t n = pwrite(fd, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0)
        finding("pwrite failed");
      done += static_cast<size_t>(n);
    }
  }
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MemFile file;
  file.set(data, size);

  attnc::NpyArray arr;
  arr.shape = {42};
  attnc::Status s = attnc::read_npy(file.path, &arr);
  if (!s.ok()) {
    if (s.message().rfind(file.path + ": ", 0) != 0)
      finding("error does not start with the path: " + s.message());
    if (arr.shape != std::vector<int64_t>{42} || !arr.data.empty())
      finding("output modified on failure: " + s.message());
    return 0;
  }
  if (arr.shape.size() > static_cast<size_t>(attnc::kMaxRank))
    finding("accepted rank above kMaxRank");
  uint64_t numel = 1;
  for (int64_t d : arr.shape) {
    if (d < 0)
      finding("accepted a negative dimension");
    numel *= static_cast<uint64_t>(d);
  }
  if (arr.data.size() != numel * attnc::dtype_size(arr.dtype))
    finding("data size does not match the shape");
  if (arr.data.size() > size)
    finding("more data bytes than the file holds");
  attnc::TensorView v = arr.view();
  if (v.rank != static_cast<int>(arr.shape.size()) || v.numel() != static_cast<int64_t>(numel))
    finding("view does not match the array");

  attnc::NpyArray again;
  attnc::Status s2 = attnc::read_npy(file.path, &again);
  if (!s2.ok() || again.shape != arr.shape || again.dtype != arr.dtype || again.data != arr.data)
    finding("a second read of the same bytes differs");
  return 0;
}
