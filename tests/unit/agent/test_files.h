// Temporary files and directories for the agent's unit tests (header-only).
#pragma once

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace medprof::agent::testing {

// The test temp dir without a trailing slash (paths are compared as text).
inline std::string TempRoot() {
  std::string t = ::testing::TempDir();
  while (t.size() > 1 && t.back() == '/') t.pop_back();
  return t;
}

// A new, empty directory <temp>/<prefix>-<pid>-<n>.
inline std::string FreshDir(const std::string& prefix) {
  static int counter = 0;
  const std::string dir = absl::StrCat(TempRoot(), "/", prefix, "-", ::getpid(), "-", counter++);
  (void)RemoveTree(dir);
  EXPECT_TRUE(MakeDirs(dir).ok()) << dir;
  return dir;
}

// Writes `contents` (bytes as they are) to <temp>/<name><pid>; returns the path.
inline std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = absl::StrCat(TempRoot(), "/", name, ::getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
  return path;
}

}  // namespace medprof::agent::testing
