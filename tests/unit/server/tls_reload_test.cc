// TLS certificates are re-read without a restart: a server started with a certificate the
// client cannot accept (wrong host name) serves a good one a few seconds after the files are
// replaced, on the same port, with the same process.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "medprof/v1/service.grpc.pb.h"
#include "server/rpc/grpc_server.h"
#include "server/rpc/tls_reloader.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::rpc {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  std::ifstream in(std::string(MEDPROF_SERVER_TESTDATA) + "/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Replaces `path` atomically (the watcher never sees half a file).
void Install(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  std::ofstream(tmp) << text;
  std::filesystem::rename(tmp, path);
}

class TlsReloadTest : public ::medprof::server::testing::DomainTest {};

TEST_F(TlsReloadTest, AReplacedCertificateIsServedWithoutARestart) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("medprof-tls-reload-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // First the client certificate (CN agent-node-a, no localhost name): clients refuse it.
  Install(dir / "server.crt", TestData("client.crt"));
  Install(dir / "server.key", TestData("client.key"));

  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = (dir / "server.crt").string();
  o.tls_key_file = (dir / "server.key").string();
  o.tls_reload_interval_s = 1;
  auto server = GrpcServer::Create(o);
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT((*server)->Start(domain_.get()), IsOk());

  auto call = [&] {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = TestData("ca.crt");
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);  // a fresh connection, not a shared one
    auto stub = v1::MedprofService::NewStub(grpc::CreateCustomChannel(
        "localhost:" + std::to_string((*server)->port()), grpc::SslCredentials(ssl), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ListAgentsResponse out;
    return stub->ListAgents(&ctx, v1::ListAgentsRequest(), &out);
  };
  EXPECT_EQ(call().error_code(), grpc::StatusCode::UNAVAILABLE);

  Install(dir / "server.key", TestData("server.key"));
  Install(dir / "server.crt", TestData("server.crt"));
  grpc::Status s;
  for (int i = 0; i < 40; ++i) {  // the watcher looks every second; allow 10 s
    s = call();
    if (s.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(s.ok()) << s.error_message();

  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  (*server)->Wait();
  std::filesystem::remove_all(dir);
}

// A renewal that would break every handshake (a key of another certificate) is refused: the
// server keeps serving the certificate it has and says why; a good renewal after it is taken.
TEST_F(TlsReloadTest, ABadRenewalKeepsTheCurrentCertificate) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("medprof-tls-bad-renewal-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  Install(dir / "server.crt", TestData("server.crt"));
  Install(dir / "server.key", TestData("server.key"));
  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = (dir / "server.crt").string();
  o.tls_key_file = (dir / "server.key").string();
  o.tls_reload_interval_s = 1;
  auto server = GrpcServer::Create(o);
  ASSERT_THAT(server, IsOk());
  ASSERT_THAT((*server)->Start(domain_.get()), IsOk());
  auto call = [&] {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = TestData("ca.crt");
    grpc::ChannelArguments args;
    args.SetInt("grpc.use_local_subchannel_pool", 1);
    auto stub = v1::MedprofService::NewStub(grpc::CreateCustomChannel(
        "localhost:" + std::to_string((*server)->port()), grpc::SslCredentials(ssl), args));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::ListAgentsResponse out;
    return stub->ListAgents(&ctx, v1::ListAgentsRequest(), &out);
  };
  ASSERT_TRUE(call().ok());

  Install(dir / "server.key", TestData("client.key"));
  EXPECT_THAT((*server)->tls_reloader()->ReloadOnce(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("does not match the certificate")));
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // the watcher would have read it
  grpc::Status s = call();
  EXPECT_TRUE(s.ok()) << "the old credentials stay: " << s.error_message();

  Install(dir / "server.crt", TestData("client.crt"));  // now a matching pair, wrong host name
  EXPECT_THAT((*server)->tls_reloader()->ReloadOnce(), IsOk());
  bool refused = false;
  for (int i = 0; i < 40 && !refused; ++i) {
    refused = call().error_code() == grpc::StatusCode::UNAVAILABLE;
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_TRUE(refused) << "a passing renewal is installed";

  (*server)->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  (*server)->Wait();
  std::filesystem::remove_all(dir);
}

TEST(TlsChecksAtStart, BrokenPairsAreRefusedBeforeListening) {
  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.crt";
  o.tls_key_file = std::string(MEDPROF_SERVER_TESTDATA) + "/client.key";
  EXPECT_THAT(GrpcServer::Create(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                              HasSubstr("client.key: does not match the certificate of --tls-cert")));
  o.tls_cert_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.key";
  o.tls_key_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.key";
  EXPECT_THAT(GrpcServer::Create(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                              HasSubstr("server.key: holds no PEM certificate (is it the key?)")));
  o.tls_cert_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.crt";
  o.tls_client_ca_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.key";
  EXPECT_THAT(GrpcServer::Create(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                              HasSubstr("--tls-client-ca")));
}

}  // namespace
}  // namespace medprof::server::rpc
