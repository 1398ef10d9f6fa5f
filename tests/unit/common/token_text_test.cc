// token_text: the one client-side check of a token's shape; no refusal shows the token.
#include "common/token_text.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::token {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kGood = "mpt_0123456789ab_" + std::string(64, 'c');

TEST(TokenText, TheDocumentedShapePasses) { EXPECT_THAT(CheckShape(kGood, "MEDPROF_TOKEN"), IsOk()); }

TEST(TokenText, EachKindOfDefectIsNamedByPositionNotByText) {
  struct Case {
    std::string token, why;
  };
  std::string upper = kGood;
  upper[20] = 'C';
  std::string no_sep = kGood;
  no_sep[16] = '-';
  for (const Case& c : {Case{"mpt_x\x01", "byte 6 is a control character"}, Case{"mpt_\xc3\xa9", "byte 5 is not ASCII"},
                        Case{"mpt_a b", "byte 6 is a space"}, Case{"mpt_a\x7f", "byte 6 is a control character"},
                        Case{"hunter2", "no mpt_ prefix"}, Case{"mpt_abc", "7 characters, not 81"},
                        Case{upper, "byte 21 is not lower-case hex"}, Case{no_sep, "byte 17 is not '_'"}}) {
    const absl::Status s = CheckShape(c.token, "MEDPROF_TOKEN");
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("MEDPROF_TOKEN: " + c.why + " (expected mpt_<12 hex>_<64 hex>)")));
    if (c.token.size() > 4) EXPECT_THAT(std::string(s.message()), Not(HasSubstr(c.token.substr(4))));
  }
}

TEST(TokenText, TokenOptionsOnACommandLineAreRefusedWithoutTheirValue) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"medprof", "--token", kGood, "studies"},
                                               std::vector<std::string>{"medprof", "--token=" + kGood}}) {
    const absl::Status s = RefuseTokenOnCommandLine(args, "MEDPROF_TOKEN_FILE");
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("use MEDPROF_TOKEN_FILE")));
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("cccc")));
  }
  EXPECT_THAT(RefuseTokenOnCommandLine({"medprof-agent", "--token-file", "/x"}, "x"), IsOk());
}

TEST(TokenText, FilesGiveTheirFirstLineAndAWarningWhenOthersMayReadThem) {
  const std::string path = ::testing::TempDir() + "/token_text_test.token";
  std::ofstream(path) << "  " << kGood << "  \nignored\n";
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(*ReadTokenFile(path, "--token-file"), kGood);
  EXPECT_EQ(TokenFileWarning(path), "");
  ::chmod(path.c_str(), 0640);
  EXPECT_THAT(TokenFileWarning(path), HasSubstr("is readable by its group (mode 640); run: chmod 600 " + path));
  ::chmod(path.c_str(), 0604);
  EXPECT_THAT(TokenFileWarning(path), HasSubstr("is readable by every user (mode 604)"));
}

}  // namespace
}  // namespace medprof::token
