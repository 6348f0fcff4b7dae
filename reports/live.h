// Live Prometheus outputs of `shmstress run` (docs/reports.md): a /metrics
// endpoint served while the run goes on (--listen) and a push of its final
// metrics to a Pushgateway at the end (--pushgateway). Both render
// metrics_families() (reports.h), so names, labels and buckets are the
// textfile's.
//
// Process contract: everything lives in the harness process. The endpoint is
// prometheus-cpp's Exposer (civetweb threads); the harness thread swaps in a
// new snapshot after each trial under a mutex, so a scrape sees one whole
// update or the previous one and never blocks the run for longer than the
// swap. The push is one HTTP request with a hard deadline (resolution,
// connect, send and reply together). A SIGKILLed harness just stops
// answering: nothing is left on disk, and the Pushgateway keeps what the last
// finished run pushed.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/results.h"
#include "harness/run_events.h"
#include "reports/reports.h"

namespace reports {

// --- --listen HOST:PORT ------------------------------------------------------
struct ListenAddress {
  std::string host;  // numeric IPv4: "127.0.0.1", "0.0.0.0"
  int port = 0;      // 0: a free port, chosen by the kernel (LiveEndpoint::port())
  bool loopback = false;  // 127.0.0.0/8
  std::string bind_spec() const;  // as civetweb wants it: "127.0.0.1:9464"
};
// "A.B.C.D:PORT", numeric only (a name could resolve to anything). Not IPv6:
// Debian's civetweb, which serves prometheus-cpp's Exposer, is built without
// it. nullopt with a message in *err otherwise.
std::optional<ListenAddress> parse_listen_address(const std::string& text, std::string* err);

// Serves GET /metrics on exactly one address.
class LiveEndpoint {
 public:
  // nullptr with *err if the address cannot be bound (in use, not local, ...).
  static std::unique_ptr<LiveEndpoint> start(const ListenAddress& a, std::string* err);
  ~LiveEndpoint();  // stops serving; prometheus-cpp's server takes ~2 s to stop
  LiveEndpoint(const LiveEndpoint&) = delete;
  LiveEndpoint& operator=(const LiveEndpoint&) = delete;
  int port() const;  // the bound port (the kernel's choice for port 0)
  // What a scrape returns from now on.
  void set(const std::vector<MetricFamily>& families);

 private:
  struct Impl;
  explicit LiveEndpoint(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// --- --pushgateway URL ---------------------------------------------------------
// Plain HTTP/1.1 over a socket rather than prometheus-cpp's Gateway: 1.0.1's
// has no timeout, and a thread with a deadline cannot take back a request
// stuck in libcurl. So: http:// only (no TLS), credentials from the URL's
// user:password@ as Basic auth.
struct PushTarget {
  std::string host;  // as given; "[::1]" without brackets
  std::string port = "80";
  std::string path_prefix;  // the URL's path, without a trailing '/': a gateway behind a prefix
  std::string basic_auth;   // base64("user:password"), if the URL had them
  std::string url;          // for messages: the URL without credentials
};
std::optional<PushTarget> parse_pushgateway_url(const std::string& url, std::string* err);
// "<prefix>/metrics/job/<job>/<name>/<value>...": values that are not plain
// [A-Za-z0-9._-]+ are sent base64url-encoded (`<name>@base64/<value>`).
std::string push_path(const PushTarget& t, const std::string& job,
                      const std::vector<std::pair<std::string, std::string>>& grouping);
// Sends `body` (text format 0.0.4) to `path` with `method`, answered within
// timeout_s or given up. True on a 2xx reply; else false with why in *err.
// POST replaces, in the group, only the metric names the body carries; PUT
// replaces the whole group.
bool http_push(const PushTarget& t, const std::string& method, const std::string& path,
               const std::string& body, double timeout_s, std::string* err);

// The push's grouping key besides job="shmstress": the subject and the shard,
// as instance="shard-<i>-of-<n>" ("shard-0-of-1" for an unsharded run), so
// the shards of one nightly each keep their own group (and their own
// last_success) instead of overwriting each other.
std::vector<std::pair<std::string, std::string>> push_grouping(const harness::RunResult& r);

// --- what `shmstress run` wires in (cli/run.cc) -----------------------------
struct LiveOptions {
  std::string listen;       // --listen HOST:PORT
  bool listen_any = false;  // --listen-any: allow a non-loopback address
  std::string pushgateway;  // --pushgateway URL
  std::string push_timeout = "10s";  // --push-timeout
  std::string subject = "native";    // the run's (RunOptions::subject)
};

// A run subscriber (harness/run_events.h): after every trial the endpoint
// serves the run so far, as in progress.
class LiveReporting : public harness::RunSubscriber {
 public:
  // Validates the options and binds the endpoint. nullptr with a message in
  // *err and the exit code in *rc: 2 for a bad value (or a non-loopback
  // --listen without --listen-any), 3 if the address cannot be bound.
  static std::shared_ptr<LiveReporting> start(const LiveOptions& o, std::string* err, int* rc);
  ~LiveReporting() override;
  void trial_finished(const harness::TrialResult& t, const harness::RunResult& so_far) override;
  // The end of the run, its exit code final: the endpoint serves the final
  // values, then the metrics are pushed (POST, grouped by job="shmstress",
  // subject and instance="shard-i-of-n": push_grouping). last_success_timestamp_seconds is sent only when exit_code is 0,
  // so a failed run leaves the gateway's last success as it was. A failed
  // push prints a warning to stderr and does not change the exit code, which
  // is returned as given.
  int finish(const harness::RunResult& r, int exit_code);

 private:
  LiveReporting() = default;
  std::unique_ptr<LiveEndpoint> endpoint_;
  std::optional<PushTarget> push_;
  std::string push_url_;
  double push_timeout_s_ = 10;
};

}  // namespace reports
