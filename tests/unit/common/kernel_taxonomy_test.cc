// Tests of medprof's kernel taxonomy (common/kernel_taxonomy.h).
//
// Data files live in tests/testdata/ (never ../shared): the H200 sample (real names, every row
// must classify as labelled) and a held-out set written before the rules were tuned (>= 95 %
// must classify as labelled; the misclassified rows are printed).
#include "common/kernel_taxonomy.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::taxonomy {
namespace {

using ::testing::SizeIs;

struct LabelledName {
  int line = 0;
  Category category = Category::kOther;
  std::string name;
};

// Repository root: $MEDPROF_SOURCE_DIR (set by ctest) or, when the binary is run by hand, the
// root derived from this file's compile-time path.
std::string SourceDir() {
  if (const char* env = std::getenv("MEDPROF_SOURCE_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  std::string file = __FILE__;
  const std::string suffix = "/tests/unit/common/kernel_taxonomy_test.cc";
  if (file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return file.substr(0, file.size() - suffix.size());
  }
  return ".";
}

// Reads "category<TAB>kernel name" rows; '#' lines and empty lines are skipped. Any malformed
// row or unknown category fails the calling test.
std::vector<LabelledName> ReadLabelled(const std::string& relative_path) {
  const std::string path = SourceDir() + "/" + relative_path;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<LabelledName> rows;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      ADD_FAILURE() << path << ":" << line_no << ": no tab in row";
      continue;
    }
    LabelledName row;
    row.line = line_no;
    row.name = line.substr(tab + 1);
    if (!ParseCategory(line.substr(0, tab), &row.category)) {
      ADD_FAILURE() << path << ":" << line_no << ": unknown category '" << line.substr(0, tab) << "'";
      continue;
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string Name(Category c) { return std::string(CategoryName(c)); }

// ---------------------------------------------------------------------------------------------
// Category names.

TEST(CategoryNames, RoundTripInOrder) {
  const std::vector<std::string> expected = {"conv",      "gemm",     "norm",     "elementwise",
                                             "layout",    "copy",     "reduction", "softmax",
                                             "optimizer", "upsample", "memset",   "other"};
  ASSERT_THAT(AllCategories(), SizeIs(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(Name(AllCategories()[i]), expected[i]);
    Category parsed = Category::kOther;
    ASSERT_TRUE(ParseCategory(expected[i], &parsed)) << expected[i];
    EXPECT_EQ(parsed, AllCategories()[i]);
  }
}

TEST(CategoryNames, ParseRejectsUnknownAndLeavesOutputAlone) {
  Category c = Category::kNorm;
  EXPECT_FALSE(ParseCategory("Conv", &c));
  EXPECT_FALSE(ParseCategory("", &c));
  EXPECT_FALSE(ParseCategory("gemm ", &c));
  EXPECT_EQ(c, Category::kNorm);
}

// ---------------------------------------------------------------------------------------------
// Data files.

TEST(KernelNames, H200SampleClassifiesAsLabelledWithNoOp) {
  const std::vector<LabelledName> rows = ReadLabelled("tests/testdata/kernel_names_h200_sample.tsv");
  ASSERT_THAT(rows, SizeIs(70));
  for (const LabelledName& row : rows) {
    EXPECT_EQ(Name(ClassifyKernel(row.name)), Name(row.category))
        << "line " << row.line << ": " << row.name;
  }
}

TEST(KernelNames, HeldOutAtLeast95PercentWithNoOp) {
  const std::vector<LabelledName> rows = ReadLabelled("tests/testdata/kernel_names_heldout.tsv");
  ASSERT_GE(rows.size(), 80u);
  size_t correct = 0;
  std::ostringstream misses;
  for (const LabelledName& row : rows) {
    const Category got = ClassifyKernel(row.name);
    if (got == row.category) {
      ++correct;
    } else {
      misses << "  line " << row.line << ": labelled " << Name(row.category) << ", classified "
             << Name(got) << ": " << row.name.substr(0, 160) << "\n";
    }
  }
  const double accuracy = static_cast<double>(correct) / static_cast<double>(rows.size());
  std::printf("held-out accuracy: %zu/%zu = %.1f %%\n%s", correct, rows.size(), 100.0 * accuracy,
              misses.str().c_str());
  ::testing::Test::RecordProperty("heldout_correct", static_cast<int>(correct));
  ::testing::Test::RecordProperty("heldout_total", static_cast<int>(rows.size()));
  EXPECT_GE(accuracy, 0.95) << "misclassified:\n" << misses.str();
}

TEST(KernelNames, DataFilesDoNotOverlap) {
  const std::vector<LabelledName> sample = ReadLabelled("tests/testdata/kernel_names_h200_sample.tsv");
  const std::vector<LabelledName> heldout = ReadLabelled("tests/testdata/kernel_names_heldout.tsv");
  for (const LabelledName& h : heldout) {
    for (const LabelledName& s : sample) {
      EXPECT_NE(h.name, s.name) << "held-out line " << h.line << " is in the sample";
    }
  }
}

}  // namespace
}  // namespace medprof::taxonomy
