// Runs a libFuzzer entry point once over files and directories, so builds without libFuzzer (gcc, ctest) replay the corpus.
//
// usage: <replay> PATH...   (every regular file of a directory, recursively, in sorted order)
// Fails when no input was found, so a missing corpus cannot pass as a clean run; a finding aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    fs::path p = argv[i];
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto &e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file())
          inputs.push_back(e.path());
    } else if (fs::is_regular_file(p, ec)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "replay: error: '%s' is neither a file nor a directory\n", argv[i]);
      return 1;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: error: no inputs\n");
    return 1;
  }
  for (const fs::path &p : inputs) {
    std::ifstream in(p, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: error: cannot read '%s'\n", p.c_str());
      return 1;
    }
    // Printed first so that a crash names its input.
    std::fprintf(stderr, "replay: %s\n", p.c_str());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs, no finding\n", inputs.size());
  return 0;
}
