// The stock catalog's scenario files, as `scripts/soak` and a user's
// `shmstress run scenarios/*.toml` name them (sorted as a shell's glob sorts
// them): what the benches that load or run the whole catalog read.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace bench {

inline std::vector<std::string> catalog() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(SHMSTRESS_SOURCE_DIR "/scenarios"))
    if (e.path().extension() == ".toml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace bench
