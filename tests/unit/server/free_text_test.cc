// Issue 22 case 6: control characters (terminal escapes, bells, newlines that split table rows)
// are refused at validation in every free-text field a client or agent can store, with the
// field named and the value not echoed.
#include <string>

#include "common/text_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kEscape = "\x1b[31mRED\x1b[0m\x07";

// The refusal names `field` and the escape's position, never the value.
void ExpectRefused(const absl::Status& s, const std::string& field) {
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          HasSubstr(field + ": character 1 is a control character (U+001B)")))
      << field;
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("RED"))) << field;
}

TEST(TextCheck, ControlCharactersOfEveryKindAndBrokenUtf8) {
  EXPECT_THAT(text::CheckNoControl("Med-DDPM 128³ — opt1 ✓", "name"), IsOk());
  EXPECT_THAT(text::CheckNoControl("a\nb", "name"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                             HasSubstr("name: character 2 is a control character (U+000A)")));
  EXPECT_THAT(text::CheckNoControl("a\tb", "name"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("(U+0009)")));
  EXPECT_THAT(text::CheckNoControl("é\x7f", "name"), StatusIs(absl::StatusCode::kInvalidArgument,
                                                              HasSubstr("character 2 is a control character (U+007F)")));
  EXPECT_THAT(text::CheckNoControl("x\xc2\x9b" "31m", "name"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("character 2 is a control character (U+009B)")));
  EXPECT_THAT(text::CheckNoControl("x\xff", "name"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("character 2 is not UTF-8")));
  EXPECT_THAT(text::CheckNoControl("x\xe2\x82", "name"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("character 2 is not UTF-8")));
}

class FreeTextTest : public testing::DomainTest {};

TEST_F(FreeTextTest, StudyNameTargetsAndCancelReason) {
  SubmitStudyRequest r;
  r.name = kEscape;
  r.presets = {"baseline"};
  r.config = testing::TinyConfig();
  ExpectRefused(domain_->studies().SubmitStudy(ctx_, r).status(), "name");
  r.name = "ok";
  r.targets = {"label.site=" + kEscape};
  EXPECT_THAT(domain_->studies().SubmitStudy(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("targets[0]: character 12 is a control character")));
  const SubmitStudyResult study = Submit({"baseline"});
  ExpectRefused(domain_->studies().CancelStudy(ctx_, study.study_id, kEscape).status(), "reason");
}

TEST_F(FreeTextTest, AgentRegistrationFields) {
  RegisterAgentRequest base;
  base.protocol_version = 1;
  base.agent_name = "node-a";
  base.host = "node-a.example.org";
  base.version = "0.1.0";
  DeviceRecord cpu;
  cpu.kind = "cpu";
  cpu.name = "cpu";
  base.devices = {cpu};
  ASSERT_THAT(ValidateRegistration(base), IsOk());
  RegisterAgentRequest r = base;
  r.agent_name = kEscape;
  ExpectRefused(ValidateRegistration(r), "agent_name");
  r = base;
  r.host = kEscape;
  ExpectRefused(ValidateRegistration(r), "host");
  r = base;
  r.version = kEscape;
  ExpectRefused(ValidateRegistration(r), "version");
  r = base;
  r.devices[0].name = kEscape;
  ExpectRefused(ValidateRegistration(r), "devices[0].name");
  r = base;
  r.devices[0].compute_capability = kEscape;
  ExpectRefused(ValidateRegistration(r), "devices[0].compute_capability");
  r = base;
  r.labels = {{"site", kEscape}};
  ExpectRefused(ValidateRegistration(r), "labels[site]");
}

TEST_F(FreeTextTest, TokenNote) {
  TokenGrant g;
  g.role = Role::kRead;
  g.project = "lab-a";
  g.note = kEscape;
  ExpectRefused(g.Validate(), "note");
}

TEST_F(FreeTextTest, ImportedRunFields) {
  ImportRunRequest base;
  base.preset = "opt1";
  base.gpu = "NVIDIA H200";
  base.source = "ncu";
  v1::KernelStat k;
  k.set_name("sm90_xmma_fprop");
  k.set_count(1);
  k.set_total_ns(1000);
  k.set_min_ns(1000);
  k.set_max_ns(1000);
  base.kernels = {k};
  v1::MetricValue m;
  m.set_scope("run");
  m.set_name("dram__bytes");
  m.set_value(1);
  m.set_unit("byte");
  base.metrics = {m};
  ASSERT_THAT(domain_->importer().Import(ctx_, base), IsOk());
  ImportRunRequest r = base;
  r.study_name = kEscape;
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "study_name");
  r = base;
  r.gpu = kEscape;
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "gpu");
  r = base;
  r.kernels[0].set_name(kEscape);
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "kernels[0].name");
  r = base;
  r.kernels[0].set_op(kEscape);
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "kernels[0].op");
  r = base;
  r.metrics[0].set_name(kEscape);
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "metrics[0].name");
  r = base;
  r.metrics[0].set_unit(kEscape);
  ExpectRefused(domain_->importer().Import(ctx_, r).status(), "metrics[0].unit");
  r = base;
  r.metrics[0].set_scope("phase:" + kEscape);
  EXPECT_THAT(domain_->importer().Import(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics[0].scope: character 7 is a control")));
}

}  // namespace
}  // namespace medprof::server
