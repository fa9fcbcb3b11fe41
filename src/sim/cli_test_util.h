// A fixture for tests that run the ecoserve binary (`simulate`, `plan`): a
// private temporary directory per test, files written and read there, and one
// command run with its stdout, stderr and exit code. Test-only header.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/subprocess.h"

namespace ecoserve::sim::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ecoserve_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `ecoserve COMMAND --quiet ARGS...`.
  CliRun run(const std::string& command, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {std::string(ECOSERVE_BINARY_DIR) + "/ecoserve", command, "--quiet"};
    argv.insert(argv.end(), args.begin(), args.end());
    Subprocess p;
    SubprocessOptions o;
    o.stderr_path = (dir_ / "stderr.txt").string();
    CliRun r;
    if (!p.start(argv, o).ok()) return r;
    r.exit_code = p.wait(&r.out);
    r.err = read("stderr.txt");
    return r;
  }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::filesystem::path dir_;
};

}  // namespace ecoserve::sim::testing
