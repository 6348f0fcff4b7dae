// The live outputs: --listen address rules, the /metrics endpoint serving the
// textfile's model, and the Pushgateway push (against a local fake gateway:
// the real one is exercised by tests/e2e/prometheus.sh).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "reports/live.h"

namespace reports {
namespace {

using harness::CheckResult;
using harness::RunResult;
using harness::TrialResult;
using harness::Verdict;

RunResult SampleRun(int exit_verdict_invalid) {
  RunResult r;
  r.subject = "native";
  r.elapsed = 3;
  TrialResult t;
  t.scenario = "basic";
  t.seed = 987654321;
  CheckResult c;
  c.invariant = "cleanup.safety";
  c.verdict = exit_verdict_invalid ? Verdict::kInvalid : Verdict::kValid;
  t.checks = {c};
  t.verdict = c.verdict;
  t.faults = {{"sigkill", 1}};
  t.acquire_ms = {0.3};
  t.barrier_ms = {2};
  t.recovery_ms = {120};
  r.add(t);
  return r;
}

TEST(Listen, ParsesNumericAddressesAndKnowsLoopback) {
  std::string err;
  auto a = parse_listen_address("127.0.0.1:9464", &err);
  ASSERT_TRUE(a) << err;
  EXPECT_TRUE(a->loopback);
  EXPECT_EQ(a->port, 9464);
  EXPECT_EQ(a->bind_spec(), "127.0.0.1:9464");
  a = parse_listen_address("127.1.2.3:0", &err);
  ASSERT_TRUE(a) << err;
  EXPECT_TRUE(a->loopback);
  a = parse_listen_address("0.0.0.0:9464", &err);
  ASSERT_TRUE(a) << err;
  EXPECT_FALSE(a->loopback);
  EXPECT_FALSE(parse_listen_address("[::1]:9464", &err));
  EXPECT_NE(err.find("IPv6"), std::string::npos) << err;
  a = parse_listen_address("10.1.2.3:80", &err);
  ASSERT_TRUE(a) << err;
  EXPECT_FALSE(a->loopback);
  for (const char* bad : {"9464", ":9464", "localhost:9464", "127.0.0.1", "127.0.0.1:",
                          "127.0.0.1:70000", "127.0.0.1:x", "[::1]9464", "::1:9464"}) {
    EXPECT_FALSE(parse_listen_address(bad, &err)) << bad;
  }
}

TEST(Listen, RefusesNonLoopbackUnlessAsked) {
  LiveOptions o;
  o.listen = "0.0.0.0:0";
  std::string err;
  int rc = 0;
  EXPECT_FALSE(LiveReporting::start(o, &err, &rc));
  EXPECT_EQ(rc, 2);
  EXPECT_NE(err.find("--listen-any"), std::string::npos) << err;
  o.listen = "127.0.0.1:x";
  EXPECT_FALSE(LiveReporting::start(o, &err, &rc));
  EXPECT_EQ(rc, 2);
}

TEST(Push, ParsesUrls) {
  std::string err;
  auto t = parse_pushgateway_url("http://127.0.0.1:9091", &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->host, "127.0.0.1");
  EXPECT_EQ(t->port, "9091");
  EXPECT_EQ(t->path_prefix, "");
  t = parse_pushgateway_url("http://user:p%40ss@gw.example:8080/prefix/", &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->host, "gw.example");
  EXPECT_EQ(t->path_prefix, "/prefix");
  EXPECT_EQ(t->basic_auth, "dXNlcjpwQHNz");  // base64("user:p@ss")
  EXPECT_EQ(t->url, "http://gw.example:8080/prefix");  // no credentials in messages
  t = parse_pushgateway_url("http://[::1]:9091", &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->host, "::1");
  t = parse_pushgateway_url("http://gw", &err);
  ASSERT_TRUE(t) << err;
  EXPECT_EQ(t->port, "80");
  EXPECT_FALSE(parse_pushgateway_url("https://gw:9091", &err));
  EXPECT_NE(err.find("https is not supported"), std::string::npos) << err;
  for (const char* bad : {"gw:9091", "http://", "http://gw:0", "http://gw:x", "http://gw:9091/?a=b"}) {
    EXPECT_FALSE(parse_pushgateway_url(bad, &err)) << bad;
  }
}

TEST(Push, GroupingKeyPath) {
  std::string err;
  auto t = *parse_pushgateway_url("http://gw:9091/pg", &err);
  EXPECT_EQ(push_path(t, "shmstress", {{"subject", "native"}}),
            "/pg/metrics/job/shmstress/subject/native");
  // Anything but [A-Za-z0-9._-] goes base64url, as the Pushgateway reads it.
  EXPECT_EQ(push_path(t, "shmstress", {{"subject", "exec:a/b"}}),
            "/pg/metrics/job/shmstress/subject@base64/ZXhlYzphL2I=");
  EXPECT_EQ(push_path(t, "shmstress", {{"subject", ""}}), "/pg/metrics/job/shmstress/subject@base64/=");
}

// A one-connection HTTP server on 127.0.0.1: records the request, answers
// `reply` (or nothing at all).
class FakeGateway {
 public:
  explicit FakeGateway(std::string reply) : reply_(std::move(reply)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 4);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeGateway() {
    done_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    thread_.join();
    ::close(fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string request() {
    for (int i = 0; i < 200 && !got_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return request_;
  }

 private:
  void serve() {
    int c = ::accept(fd_, nullptr, nullptr);
    if (c < 0) return;
    std::string req;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      req.append(buf, static_cast<std::size_t>(n));
      auto h = req.find("\r\n\r\n");
      if (h == std::string::npos) continue;
      auto cl = req.find("Content-Length: ");
      std::size_t len = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
      if (req.size() >= h + 4 + len) break;
    }
    request_ = req;
    got_ = true;
    if (!reply_.empty()) {
      ::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
    } else {
      while (!done_) std::this_thread::sleep_for(std::chrono::milliseconds(10));  // hang
    }
    ::close(c);
  }
  std::string reply_;
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::atomic<bool> done_{false}, got_{false};
  std::string request_;
};

TEST(Push, PostsTheTextFormat) {
  FakeGateway gw("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  std::string err;
  auto t = *parse_pushgateway_url(gw.url(), &err);
  ASSERT_TRUE(http_push(t, "POST", "/metrics/job/x", "a_total 1\n", 5, &err)) << err;
  std::string req = gw.request();
  EXPECT_TRUE(req.starts_with("POST /metrics/job/x HTTP/1.1\r\n")) << req;
  EXPECT_NE(req.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << req;
  EXPECT_TRUE(req.ends_with("\r\n\r\na_total 1\n")) << req;
}

TEST(Push, ReportsTheGatewaysError) {
  FakeGateway gw("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\npushed metrics are invalid\n");
  std::string err;
  auto t = *parse_pushgateway_url(gw.url(), &err);
  EXPECT_FALSE(http_push(t, "POST", "/metrics/job/x", "a_total 1\n", 5, &err));
  EXPECT_EQ(err, "HTTP 400: pushed metrics are invalid");
}

TEST(Push, GivesUpAtTheDeadline) {
  FakeGateway gw("");  // reads the request, never answers
  std::string err;
  auto t = *parse_pushgateway_url(gw.url(), &err);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(http_push(t, "POST", "/metrics/job/x", "a_total 1\n", 0.5, &err));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 2.0);
  EXPECT_NE(err.find("timed out"), std::string::npos) << err;
}

TEST(Push, RefusedConnectionFailsFast) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // a port nobody listens on
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string err;
  auto t = *parse_pushgateway_url("http://127.0.0.1:" + std::to_string(ntohs(a.sin_port)), &err);
  EXPECT_FALSE(http_push(t, "POST", "/metrics/job/x", "", 5, &err));
  ::close(fd);
  EXPECT_NE(err.find("cannot connect"), std::string::npos) << err;
}

// The end of a run: POST to job="shmstress", subject=...; last_success only
// when the exit code is 0, so a failed run leaves the gateway's as it was.
TEST(Push, FinishSendsLastSuccessOnlyOnExitZero) {
  for (int rc : {1, 0}) {
    FakeGateway gw("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    LiveOptions o;
    o.pushgateway = gw.url();
    o.push_timeout = "5s";
    std::string err;
    int start_rc = 0;
    auto live = LiveReporting::start(o, &err, &start_rc);
    ASSERT_TRUE(live) << err;
    EXPECT_EQ(live->finish(SampleRun(rc), rc), rc);
    std::string req = gw.request();
    EXPECT_TRUE(req.starts_with("POST /metrics/job/shmstress/subject/native/instance/shard-0-of-1 HTTP/1.1\r\n"))
        << req;
    EXPECT_NE(req.find("\nshmstress_run_exit_code{subject=\"native\"} " + std::to_string(rc) + "\n"),
              std::string::npos)
        << req;
    EXPECT_NE(req.find("\nshmstress_last_run_timestamp_seconds{"), std::string::npos);
    EXPECT_EQ(req.find("shmstress_last_success_timestamp_seconds") != std::string::npos, rc == 0) << req;
    EXPECT_NE(req.find("shmstress_recovery_seconds_bucket{"), std::string::npos);
  }
}

// Each shard pushes into its own group (instance="shard-<i>-of-<n>"), so
// the shards of one nightly do not overwrite each other.
TEST(Push, EachShardHasItsOwnGroup) {
  for (int shard : {0, 3}) {
    FakeGateway gw("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    LiveOptions o;
    o.pushgateway = gw.url();
    o.push_timeout = "5s";
    std::string err;
    int start_rc = 0;
    auto live = LiveReporting::start(o, &err, &start_rc);
    ASSERT_TRUE(live) << err;
    auto r = SampleRun(0);
    r.shard_index = shard;
    r.shard_count = 8;
    live->finish(r, 0);
    EXPECT_TRUE(gw.request().starts_with("POST /metrics/job/shmstress/subject/native/instance/shard-" +
                                         std::to_string(shard) + "-of-8 HTTP/1.1\r\n"));
  }
}

// A push that fails leaves the exit code alone.
TEST(Push, FailureKeepsTheExitCode) {
  FakeGateway gw("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops");
  LiveOptions o;
  o.pushgateway = gw.url();
  o.push_timeout = "500ms";
  std::string err;
  int start_rc = 0;
  auto live = LiveReporting::start(o, &err, &start_rc);
  ASSERT_TRUE(live) << err;
  EXPECT_EQ(live->finish(SampleRun(0), 0), 0);
  EXPECT_EQ(live->finish(SampleRun(1), 4), 4);  // nobody accepts this one: it times out
}

// GET path from 127.0.0.1:port; the body.
std::string http_get(int port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  auto h = out.find("\r\n\r\n");
  return h == std::string::npos ? "" : out.substr(h + 4);
}

// The names (with _bucket/_sum/_count) and label sets of every sample.
std::set<std::string> series(const std::string& text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || !line.starts_with("shmstress_")) continue;
    std::string id = line.substr(0, line.rfind(' '));
    // prometheus-cpp spells le="0.0001" as the textfile does; the order of
    // the le label among the others is the only freedom.
    out.insert(id);
  }
  return out;
}

TEST(LiveEndpoint, ServesTheTextfilesSeries) {
  std::string err;
  auto a = parse_listen_address("127.0.0.1:0", &err);
  ASSERT_TRUE(a) << err;
  auto ep = LiveEndpoint::start(*a, &err);
  ASSERT_TRUE(ep) << err;
  ASSERT_GT(ep->port(), 0);
  RunResult r = SampleRun(1);
  MetricsOptions o;
  o.in_progress = true;
  ep->set(metrics_families(r, o));
  std::string served = http_get(ep->port(), "/metrics");
  ASSERT_FALSE(served.empty());
  auto want = series(metrics_text(r, o));
  auto got = series(served);
  for (const auto& s : want) EXPECT_TRUE(got.contains(s)) << "not served: " << s;
  EXPECT_NE(served.find("# TYPE shmstress_recovery_seconds histogram"), std::string::npos);
  EXPECT_EQ(served.find("987654321"), std::string::npos) << "a seed leaked";
  // A second server cannot take the same address.
  ListenAddress same = *a;
  same.port = ep->port();
  EXPECT_FALSE(LiveEndpoint::start(same, &err));
}

}  // namespace
}  // namespace reports
