// `medprof export --format chrome-trace` opened in a real trace viewer: speedscope (the npm
// package, installed by scripts/install-deps.sh; it runs from file:// offline) in headless
// Chromium, loading the export of a CPU run (the host timeline: phases and ops) and of a GPU run
// (kernels on two streams, memcpy, ops, phases). The page must import it without a console
// error, name the profile, and list the tracks the export declares (speedscope makes one
// profile per process and thread). Perfetto's UI was not tried: it is not packaged for offline use
// the way speedscope is.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "client/query_format.h"
#include "tests/report/headless_chromium.h"

namespace medprof::client {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// speedscope's dist/release/index.html: $MEDPROF_SPEEDSCOPE_DIR, else where install-deps.sh puts it.
std::string SpeedscopeIndex() {
  const char* env = std::getenv("MEDPROF_SPEEDSCOPE_DIR");
  const std::string dir = env != nullptr ? env : "/opt/medprof-test-tools/node_modules/speedscope";
  return dir + "/dist/release/index.html";
}

std::string OutDir() {
  const char* env = std::getenv("MEDPROF_TEST_OUTPUT_DIR");
  const std::string dir = env != nullptr ? env : ::testing::TempDir();
  fs::create_directories(dir);
  return dir;
}

v1::TimelineEvent Event(const char* name, const char* kind, int64_t start_us, int64_t dur_us, int stream,
                        const char* phase, int step) {
  v1::TimelineEvent e;
  e.set_name(name);
  e.set_kind(kind);
  e.set_start_ns(start_us * 1000);
  e.set_duration_ns(dur_us * 1000);
  e.set_stream(stream);
  e.set_phase(phase);
  e.set_step(step);
  return e;
}

// A CPU run's timeline as the CPU backend stores it, and a GPU run's as the CUPTI backend does.
v1::GetTimelineResponse Timeline(bool gpu) {
  v1::GetTimelineResponse r;
  r.set_run_id(gpu ? "run-gpu" : "run-cpu");
  v1::Timeline* t = r.mutable_timeline();
  t->set_origin_unix_ns(1'700'000'000'000'000'000);
  t->set_steps(2);
  for (int step = 0; step < 2; ++step) {
    const int64_t at = step * 1000;
    *t->add_events() = Event("step", "phase", at, 900, -1, "", step);
    *t->add_events() = Event("fwd", "phase", at, 400, -1, "fwd", step);
    *t->add_events() = Event("aten::conv3d", "op", at + 10, 300, -1, "fwd", step);
    *t->add_events() = Event("aten::convolution", "op", at + 20, 250, -1, "fwd", step);
    *t->add_events() = Event("bwd", "phase", at + 400, 450, -1, "bwd", step);
    *t->add_events() = Event("aten::add_", "op", at + 420, 100, -1, "bwd", step);
    if (gpu) {
      *t->add_events() = Event("sm90_xmma_fprop_implicit_gemm_tf32", "kernel", at + 30, 200, 7, "fwd", step);
      *t->add_events() = Event("nchwToNhwcKernel", "kernel", at + 240, 40, 7, "fwd", step);
      *t->add_events() = Event("memcpy HtoD", "memcpy", at + 5, 20, 13, "fwd", step);
    }
  }
  return r;
}

// Waits (up to 20 s) until speedscope shows a profile, then reports what it shows.
constexpr char kProbe[] = R"js(new Promise(resolve => {
  const t0 = Date.now();
  const check = () => {
    const title = document.title;
    if (title !== 'speedscope' && title.indexOf('speedscope') >= 0 || Date.now() - t0 > 20000) {
      resolve({title: title, text: document.body.innerText, canvases: document.querySelectorAll('canvas').length});
    } else {
      setTimeout(check, 100);
    }
  };
  check();
}))js";

json Open(const std::string& trace_json, const std::string& name) {
  const std::string dir = OutDir();
  const std::string trace_path = dir + "/" + name + ".json";
  std::ofstream(trace_path) << trace_json;
  // What `speedscope FILE` does: a script that hands the file to the page, named in the hash.
  const std::string js_path = dir + "/" + name + ".speedscope.js";
  std::ofstream(js_path) << "speedscope.loadFileFromBase64(" << json(name + ".json").dump() << ", "
                         << json(absl::Base64Escape(trace_json)).dump() << ")";
  auto page = medprof::testing::LoadInHeadlessChromium(SpeedscopeIndex() + "#localProfilePath=" + js_path, kProbe,
                                                       dir + "/chromium-" + name);
  EXPECT_TRUE(page.ok()) << page.status();
  if (!page.ok()) return json();
  EXPECT_THAT(page->errors, IsEmpty()) << ::testing::PrintToString(page->console);
  for (const std::string& url : page->requests) {
    EXPECT_TRUE(url.rfind("file://", 0) == 0 || url.rfind("data:", 0) == 0 || url.rfind("blob:", 0) == 0)
        << "network request: " << url;
  }
  std::ofstream(dir + "/" + name + ".png", std::ios::binary) << page->screenshot_png;
  return page->value;
}

TEST(TraceViewerTest, SpeedscopeLoadsCpuAndGpuChromeTraces) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  ASSERT_TRUE(fs::exists(SpeedscopeIndex())) << SpeedscopeIndex()
                                             << " missing: scripts/install-deps.sh installs the speedscope npm package";
  for (bool gpu : {false, true}) {
    const std::string name = gpu ? "gpu_trace" : "cpu_trace";
    const json page = Open(FormatChromeTrace(Timeline(gpu)), name);
    ASSERT_TRUE(page.is_object()) << name;
    EXPECT_EQ(page["title"], name + ".json - speedscope") << page.dump();
    EXPECT_GT(page["canvases"].get<int>(), 0) << name;
    // The tracks: speedscope shows the first of its profiles (one per process and thread) and
    // their count — host phases and ops; on the GPU also streams 7 and 13.
    EXPECT_THAT(page["text"].get<std::string>(), HasSubstr("host (pid 0), phases (tid 0)")) << name;
    EXPECT_THAT(page["text"].get<std::string>(), HasSubstr(gpu ? "(1/4)" : "(1/2)")) << name;
  }
}

}  // namespace
}  // namespace medprof::client
