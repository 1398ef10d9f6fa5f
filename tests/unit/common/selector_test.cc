#include "common/selector.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::selector {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Agent H200Node() {
  Agent a;
  a.name = "c001-slot0";
  a.host = "C001.tacc.utexas.edu";
  a.labels = {{"site", "tacc"}, {"partition", "h100"}, {"rack", "r7"}};
  a.devices = {{0, "cuda", "NVIDIA H200", "9.0"}, {1, "cuda", "NVIDIA A100-SXM4-80GB", "8.0"},
               {-1, "cpu", "cpu", ""}};
  return a;
}

TEST(SelectorParse, EmptyTextIsTheAnySelector) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector s, Parse(""));
  EXPECT_TRUE(s.empty());
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector blank, Parse("   "));
  EXPECT_TRUE(blank.empty());
  EXPECT_EQ(s.ToString(), "");
}

TEST(SelectorParse, ReadsEveryKey) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(
      Selector s, Parse(" gpu = H200 ,arch=9.0,site=tacc,partition=h100,host=c001,agent=a1,"
                        "device=CUDA,label.rack=r7"));
  EXPECT_EQ(s.gpu, "H200");
  EXPECT_EQ(s.arch, "9.0");
  EXPECT_EQ(s.site, "tacc");
  EXPECT_EQ(s.partition, "h100");
  EXPECT_EQ(s.host, "c001");
  EXPECT_EQ(s.agent, "a1");
  EXPECT_EQ(s.device, "cuda");
  ASSERT_EQ(s.labels.size(), 1u);
  EXPECT_EQ(s.labels.at("rack"), "r7");
  EXPECT_EQ(s.ToString(),
            "gpu=H200,arch=9.0,site=tacc,partition=h100,host=c001,agent=a1,device=cuda,label.rack=r7");
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector again, Parse(s.ToString()));
  EXPECT_EQ(again, s);
}

TEST(SelectorParse, EmptyValueIsRefusedWithTheGrammar) {
  EXPECT_THAT(Parse("gpu="),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "cannot parse 'gpu=' (expected key=value pairs separated by commas; keys "
                       "gpu, arch, site, partition, host, agent, device, label.<name>)"));
}

TEST(SelectorParse, RefusesMalformedText) {
  EXPECT_THAT(Parse("h100"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot parse 'h100'")));
  EXPECT_THAT(Parse("=h100"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot parse")));
  EXPECT_THAT(Parse("gpu=h100,"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot parse")));
  EXPECT_THAT(Parse("gpu=a=b"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot parse")));
  EXPECT_THAT(Parse("color=red"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown key 'color'")));
  EXPECT_THAT(Parse("gpu=a100,gpu=h100"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key 'gpu' appears twice")));
  EXPECT_THAT(Parse("label.x=1,label.x=2"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("key 'label.x' appears twice")));
  EXPECT_THAT(Parse("device=tpu"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("allowed cpu|cuda")));
  EXPECT_THAT(Parse("arch=sm_90"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected major.minor")));
  EXPECT_THAT(Parse("label.=x"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("label name '' ")));
  EXPECT_THAT(Parse(std::string(2000, 'a')),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 1024")));
}

TEST(SelectorMatch, EmptySelectorTakesEveryDevice) {
  EXPECT_THAT(MatchingDevices(Selector{}, H200Node()), ElementsAre(0u, 1u, 2u));
}

TEST(SelectorMatch, GpuIsACaseInsensitiveSubstring) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector s, Parse("gpu=h200"));
  EXPECT_THAT(MatchingDevices(s, H200Node()), ElementsAre(0u));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector a100, Parse("gpu=A100"));
  EXPECT_THAT(MatchingDevices(a100, H200Node()), ElementsAre(1u));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector v100, Parse("gpu=v100"));
  EXPECT_THAT(MatchingDevices(v100, H200Node()), IsEmpty());
}

TEST(SelectorMatch, ArchAndDeviceKind) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector s80, Parse("arch=8.0"));
  EXPECT_THAT(MatchingDevices(s80, H200Node()), ElementsAre(1u));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector cpu, Parse("device=cpu"));
  EXPECT_THAT(MatchingDevices(cpu, H200Node()), ElementsAre(2u));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector cuda, Parse("device=cuda"));
  EXPECT_THAT(MatchingDevices(cuda, H200Node()), ElementsAre(0u, 1u));
  // Device-level keys must hold for the same device.
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector mixed, Parse("gpu=h200,arch=8.0"));
  EXPECT_THAT(MatchingDevices(mixed, H200Node()), IsEmpty());
}

TEST(SelectorMatch, AgentLevelKeys) {
  const Agent a = H200Node();
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector site, Parse("site=tacc,partition=h100"));
  EXPECT_TRUE(MatchesAgent(site, a));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector other_site, Parse("site=sdsc"));
  EXPECT_FALSE(MatchesAgent(other_site, a));
  EXPECT_THAT(MatchingDevices(other_site, a), IsEmpty());
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector host, Parse("host=c001.TACC.utexas.edu"));
  EXPECT_TRUE(MatchesAgent(host, a));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector agent, Parse("agent=c001-slot0"));
  EXPECT_TRUE(MatchesAgent(agent, a));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector agent_case, Parse("agent=C001-slot0"));
  EXPECT_FALSE(MatchesAgent(agent_case, a));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector rack, Parse("label.rack=r7"));
  EXPECT_TRUE(MatchesAgent(rack, a));
  MEDPROF_ASSERT_OK_AND_ASSIGN(Selector missing_label, Parse("label.owner=me"));
  EXPECT_FALSE(MatchesAgent(missing_label, a));
}

}  // namespace
}  // namespace medprof::selector
