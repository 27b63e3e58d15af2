// Unit tests for attnc/output.h: refused targets, all-or-nothing commits with injected failures, devices, signals.
#include "attnc/output.h"

#include <dirent.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace attnc {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

class OutputTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/')
      tmpl += '/';
    tmpl += "attnc_output_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << std::strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string &name) const { return dir_ + "/" + name; }

  std::vector<std::string> list_dir(const std::string &sub = "") const {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(sub.empty() ? dir_ : path(sub)))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string put(const std::string &name, const std::string &text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  static std::string read(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_;
};

TEST_F(OutputTest, ReplacesAFileAndKeepsItsPermissions) {
  const std::string p = put("out.txt", "old");
  ASSERT_EQ(chmod(p.c_str(), 0640), 0);
  ASSERT_TRUE(write_file(p, "new").ok());
  EXPECT_EQ(read(p), "new");
  struct stat st;
  ASSERT_EQ(stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_THAT(list_dir(), ElementsAre("out.txt"));
}

TEST_F(OutputTest, RefusesFilesTheRunReadsByIdentity) {
  const std::string in = put("in.attn", "source");
  ASSERT_EQ(link(in.c_str(), path("hard.attn").c_str()), 0);
  ASSERT_EQ(symlink(in.c_str(), path("soft.attn").c_str()), 0);
  for (const std::string &alias : {in, path("hard.attn"), path("soft.attn"), dir_ + "/./in.attn"}) {
    // Either order: imports are only known after the outputs are declared.
    OutputSet before;
    size_t i;
    ASSERT_TRUE(before.protect(in, "the input file").ok());
    Status s = before.add(alias, "output 'o'", &i);
    EXPECT_EQ(s.message(), "refusing to overwrite the input file '" + in + "' with output 'o'")
        << alias;
    OutputSet after;
    ASSERT_TRUE(after.add(alias, "", &i).ok());
    s = after.protect(in, "the imported file");
    EXPECT_EQ(s.message(), "refusing to overwrite the imported file '" + in + "'") << alias;
  }
  EXPECT_EQ(read(in), "source");
}

TEST_F(OutputTest, RefusesTheSameFileTwice) {
  size_t i;
  OutputSet fresh; // not there yet: compared by normalised path
  ASSERT_TRUE(fresh.add(path("new.npy"), "output 'a'", &i).ok());
  Status s = fresh.add(dir_ + "/./new.npy", "output 'b'", &i);
  EXPECT_EQ(s.message(), "refusing to write the same file twice: output 'a' ('" + path("new.npy") +
                             "') and output 'b' ('" + dir_ + "/./new.npy')");
  const std::string old = put("old.npy", "x");
  ASSERT_EQ(link(old.c_str(), path("link.npy").c_str()), 0);
  OutputSet existing; // there: compared by st_dev/st_ino
  ASSERT_TRUE(existing.add(old, "", &i).ok());
  EXPECT_THAT(existing.add(path("link.npy"), "", &i).message(),
              StartsWith("refusing to write the same file twice"));
  // Devices are only written to, never replaced: naming one twice loses nothing.
  OutputSet devices;
  ASSERT_TRUE(devices.add("/dev/null", "", &i).ok());
  EXPECT_TRUE(devices.add("/dev/null", "", &i).ok());
}

TEST_F(OutputTest, RefusesDirectoriesMissingDirectoriesAndDanglingLinks) {
  size_t i;
  OutputSet set;
  ASSERT_EQ(mkdir(path("d").c_str(), 0755), 0);
  EXPECT_EQ(set.add(path("d"), "", &i).message(),
            "cannot write '" + path("d") + "': it is a directory");
  EXPECT_EQ(set.add(path("no/x"), "", &i).message(),
            "cannot write '" + path("no/x") + "': No such file or directory");
  ASSERT_EQ(symlink(path("missing").c_str(), path("dangling").c_str()), 0);
  EXPECT_EQ(set.add(path("dangling"), "", &i).message(),
            "cannot write '" + path("dangling") + "': it is a symbolic link to a missing file");
  EXPECT_TRUE(fs::is_directory(path("d")));
}

TEST_F(OutputTest, WritesThroughASymbolicLink) {
  const std::string real = put("real.txt", "old");
  ASSERT_EQ(symlink("real.txt", path("link.txt").c_str()), 0);
  ASSERT_TRUE(write_file(path("link.txt"), "new").ok());
  EXPECT_TRUE(fs::is_symlink(path("link.txt")));
  EXPECT_EQ(read(real), "new");
  EXPECT_THAT(list_dir(), ElementsAre("link.txt", "real.txt"));
}

// RLIMIT_FSIZE makes a write fail part way like a full disk (EFBIG instead of ENOSPC), without a
// mount and as root too.
class FileSizeLimit {
public:
  explicit FileSizeLimit(rlim_t bytes) {
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old_);
    rlimit r = old_;
    r.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &r);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &old_);
    signal(SIGXFSZ, old_handler_);
  }

private:
  rlimit old_;
  sighandler_t old_handler_;
};

TEST_F(OutputTest, NothingChangesWhenAWriteFails) {
  const std::string a = put("k.a", "old archive"), h = put("k.h", "old header"),
                    d = put("k.attnc.h", "old descriptor");
  OutputSet set;
  size_t ia, ih, id, in;
  ASSERT_TRUE(set.add(a, "", &ia).ok());
  ASSERT_TRUE(set.add(h, "", &ih).ok());
  ASSERT_TRUE(set.add(d, "", &id).ok());
  ASSERT_TRUE(set.add(path("k.d"), "", &in).ok()); // a new file
  {
    FileSizeLimit limit(4096);
    ASSERT_TRUE(set.append(ia, "new archive").ok());
    ASSERT_TRUE(set.append(ih, "new header").ok());
    ASSERT_TRUE(set.append(in, "k.a: k.attn").ok());
    Status s = set.append(id, std::string(8192, 'x'));
    EXPECT_EQ(s.message(), "cannot write '" + d + "': File too large");
  }
  EXPECT_EQ(set.commit().message(), "cannot write '" + d + "': File too large");
  EXPECT_EQ(read(a), "old archive");
  EXPECT_EQ(read(h), "old header");
  EXPECT_EQ(read(d), "old descriptor");
  EXPECT_THAT(list_dir(), ElementsAre("k.a", "k.attnc.h", "k.h"));
}

TEST_F(OutputTest, NothingChangesWhenARenameFails) {
  const std::string a = put("a", "old a");
  OutputSet set;
  size_t ia, in, ib;
  ASSERT_TRUE(set.add(a, "", &ia).ok());
  ASSERT_TRUE(set.add(path("n"), "", &in).ok());
  ASSERT_TRUE(set.add(path("b"), "", &ib).ok());
  ASSERT_TRUE(set.append(ia, "new a").ok());
  ASSERT_TRUE(set.append(in, "new n").ok());
  ASSERT_TRUE(set.append(ib, "new b").ok());
  // After the checks, a directory takes b's name: its rename fails after a's and n's succeeded.
  ASSERT_EQ(mkdir(path("b").c_str(), 0755), 0);
  EXPECT_EQ(set.commit().message(), "cannot write '" + path("b") + "': Is a directory");
  EXPECT_EQ(read(a), "old a");
  EXPECT_THAT(list_dir(), ElementsAre("a", "b"));
  EXPECT_TRUE(list_dir("b").empty());
}

TEST_F(OutputTest, DevicesAndFifosAreWrittenInPlace) {
  const std::string fifo = path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = read(fifo); });
  OutputSet set;
  size_t inull, ififo, ifile;
  ASSERT_TRUE(set.add("/dev/null", "", &inull).ok());
  ASSERT_TRUE(set.add(fifo, "", &ififo).ok());
  ASSERT_TRUE(set.add(path("file"), "", &ifile).ok());
  ASSERT_TRUE(set.append(inull, "discarded").ok());
  ASSERT_TRUE(set.append(ififo, "through the fifo").ok());
  ASSERT_TRUE(set.append(ifile, "a file").ok());
  Status s = set.commit();
  reader.join();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(got, "through the fifo");
  EXPECT_EQ(read(path("file")), "a file");
  struct stat st;
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  ASSERT_EQ(stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_THAT(list_dir(), ElementsAre("fifo", "file"));
}

TEST_F(OutputTest, AFullDeviceLeavesTheFilesAsTheyWere) {
  if (access("/dev/full", W_OK) != 0)
    GTEST_SKIP() << "no /dev/full";
  const std::string a = put("k.a", "old archive");
  OutputSet set;
  size_t ia, ifull;
  ASSERT_TRUE(set.add(a, "", &ia).ok());
  ASSERT_TRUE(set.add("/dev/full", "", &ifull).ok());
  ASSERT_TRUE(set.append(ia, "new archive").ok());
  ASSERT_TRUE(set.append(ifull, "k.a: k.attn").ok());
  EXPECT_EQ(set.commit().message(), "cannot write '/dev/full': No space left on device");
  EXPECT_EQ(read(a), "old archive");
  EXPECT_THAT(list_dir(), ElementsAre("k.a"));
  struct stat st;
  ASSERT_EQ(stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(OutputTest, TemporaryNamesAreUnique) {
  const std::string p = path("db.json");
  OutputSet first, second;
  size_t i1, i2;
  ASSERT_TRUE(first.add(p, "", &i1).ok());
  ASSERT_TRUE(second.add(p, "", &i2).ok());
  ASSERT_TRUE(first.append(i1, "first").ok());
  ASSERT_TRUE(second.append(i2, "second").ok());
  std::vector<std::string> temps = list_dir();
  ASSERT_EQ(temps.size(), 2u);
  EXPECT_NE(temps[0], temps[1]);
  for (const std::string &t : temps)
    EXPECT_THAT(t, StartsWith("db.json.tmp."));
  ASSERT_TRUE(first.commit().ok());
  ASSERT_TRUE(second.commit().ok());
  EXPECT_EQ(read(p), "second");
  EXPECT_THAT(list_dir(), ElementsAre("db.json"));
}

TEST_F(OutputTest, TempDirIsRemovedWithItsContents) {
  const char *old = std::getenv("TMPDIR");
  std::string saved = old ? old : "";
  setenv("TMPDIR", dir_.c_str(), 1);
  {
    TempDir t;
    ASSERT_TRUE(t.create("attnc").ok());
    EXPECT_THAT(t.path(), StartsWith(path("attnc.")));
    put(fs::path(t.path()).filename().string() + "/runtime.a", "bytes");
    ASSERT_EQ(mkdir((t.path() + "/sub").c_str(), 0755), 0);
  }
  if (old)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_TRUE(list_dir().empty());
}

// A child stages a file, fills a temporary directory and one made by mkdtemp("/tmp/XXXXXX") as
// Halide makes its own (named in *halide_dir), says it is ready, and waits for a signal.
pid_t start_child(const std::string &dir, int ignored_signal, std::string *halide_dir) {
  int ready[2];
  if (pipe(ready) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    if (ignored_signal)
      signal(ignored_signal, SIG_IGN);
    install_cleanup_handlers();
    setenv("TMPDIR", (dir + "/tmp").c_str(), 1);
    TempDir t;
    OutputSet set;
    size_t i;
    if (!t.create("attnc").ok() || !set.add(dir + "/o.npy", "", &i).ok() ||
        !set.append(i, "new").ok())
      _exit(3);
    std::ofstream(t.path() + "/kernel.o") << "object";
    std::string halide = "/tmp/XXXXXX";
    if (mkdtemp(halide.data()) == nullptr)
      _exit(5);
    std::ofstream(halide + "/k.a.o") << "object";
    if (write(ready[1], halide.data(), halide.size()) != (ssize_t)halide.size())
      _exit(4);
    for (;;)
      pause();
  }
  close(ready[1]);
  char name[12] = {};
  bool ok = read(ready[0], name, 11) == 11;
  close(ready[0]);
  if (halide_dir)
    *halide_dir = name;
  return ok ? pid : -1;
}

TEST_F(OutputTest, SignalsRemoveWhatIsInFlight) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    put("o.npy", "old");
    fs::create_directory(path("tmp"));
    std::string halide;
    pid_t pid = start_child(dir_, 0, &halide);
    ASSERT_GT(pid, 0);
    EXPECT_TRUE(fs::exists(halide + "/k.a.o"));
    EXPECT_THAT(list_dir(), ::testing::Contains(StartsWith("o.npy.tmp.")));
    EXPECT_EQ(list_dir("tmp").size(), 1u);
    kill(pid, sig);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    // Killed by the signal itself, as a shell's 128+N expects.
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig)
        << strsignal(sig) << ": status " << status;
    EXPECT_THAT(list_dir(), ElementsAre("o.npy", "tmp")) << strsignal(sig);
    EXPECT_TRUE(list_dir("tmp").empty()) << strsignal(sig);
    EXPECT_FALSE(fs::exists(halide)) << strsignal(sig);
    EXPECT_EQ(read(path("o.npy")), "old");
  }
}

TEST_F(OutputTest, AnIgnoredSignalStaysIgnored) {
  fs::create_directory(path("tmp"));
  std::string halide;
  pid_t pid = start_child(dir_, SIGINT, &halide); // as nohup or a background job in a script
  ASSERT_GT(pid, 0);
  kill(pid, SIGINT);
  int status = 0;
  usleep(100 * 1000);
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), 0) << "SIGINT ended the child";
  kill(pid, SIGTERM);
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_TRUE(list_dir("tmp").empty());
  EXPECT_FALSE(fs::exists(halide));
}

} // namespace
} // namespace attnc
