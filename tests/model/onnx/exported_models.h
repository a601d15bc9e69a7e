// The ONNX files the tests import, exported once by export_models.py (Debian's python3-torch)
// and shared by every test process: ctest runs each test in a process of its own, often two at
// a time, and an export takes about 20 s. They are kept beside the test binary, under
// onnx-test-models/<hash of the export script>/, made under a file lock; the script writes
// expected.json last, so a directory with it is complete.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace hetplan::testing {

struct ExportedModels {
  std::filesystem::path dir;  // the files and expected.json
  bool ok = false;
  std::string log;  // the export's output, when it failed
};

inline ExportedModels exported_onnx_models() {
  namespace fs = std::filesystem;
  const std::string script = std::string(HETPLAN_SOURCE_DIR) + "/tests/model/onnx/export_models.py";
  std::ifstream in(script);
  std::stringstream text;
  text << in.rdbuf();
  const fs::path root = fs::read_symlink("/proc/self/exe").parent_path() / "onnx-test-models";
  fs::create_directories(root);
  const std::string key = std::to_string(std::hash<std::string>{}(text.str()));
  ExportedModels out{root / key, false, ""};
  const int lock = ::open((root / (key + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  if (!fs::exists(out.dir / "expected.json")) {
    fs::remove_all(out.dir);
    fs::create_directories(out.dir);
    const std::string cmd = "/usr/bin/python3 " + script + " " + out.dir.string() + " >" +
                            (out.dir / "export.log").string() + " 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      std::ifstream log(out.dir / "export.log");
      std::stringstream s;
      s << log.rdbuf();
      out.log = s.str();
      fs::remove(out.dir / "expected.json");
    }
  }
  out.ok = fs::exists(out.dir / "expected.json");
  if (lock >= 0) {
    ::flock(lock, LOCK_UN);
    ::close(lock);
  }
  return out;
}

// An empty directory of this process's own for the files a test writes (the exported ones are
// shared, and read only).
inline std::filesystem::path fresh_scratch_dir(const std::string& prefix) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (prefix + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace hetplan::testing
