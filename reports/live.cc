// The live /metrics endpoint (prometheus-cpp's Exposer serving a snapshot of
// metrics_families) and the end-of-run wiring of --listen / --pushgateway.
#include "reports/live.h"

#include <arpa/inet.h>
#include <signal.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>

#include "harness/scenario.h"

namespace reports {
namespace {

// Our model as prometheus-cpp's (what its text serializer writes).
std::vector<prometheus::MetricFamily> to_prometheus(const std::vector<MetricFamily>& families) {
  std::vector<prometheus::MetricFamily> out;
  const auto& bounds = latency_buckets_s();
  for (const auto& f : families) {
    prometheus::MetricFamily p;
    p.name = f.name;
    p.help = f.help;
    p.type = f.type == "counter"     ? prometheus::MetricType::Counter
             : f.type == "histogram" ? prometheus::MetricType::Histogram
                                     : prometheus::MetricType::Gauge;
    for (const auto& s : f.samples) {
      prometheus::ClientMetric m;
      for (const auto& [k, v] : s.labels) m.label.push_back({k, v});
      switch (p.type) {
        case prometheus::MetricType::Counter:
          m.counter.value = s.value;
          break;
        case prometheus::MetricType::Histogram:
          m.histogram.sample_count = s.count;
          m.histogram.sample_sum = s.sum;
          for (std::size_t i = 0; i < bounds.size() && i < s.buckets.size(); ++i) {
            m.histogram.bucket.push_back({s.buckets[i], bounds[i]});
          }
          m.histogram.bucket.push_back({s.count, std::numeric_limits<double>::infinity()});
          break;
        default:
          m.gauge.value = s.value;
      }
      p.metric.push_back(std::move(m));
    }
    out.push_back(std::move(p));
  }
  return out;
}

// What a scrape collects: the last snapshot the harness set.
class Snapshot : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return families_;
  }
  void set(std::vector<prometheus::MetricFamily> f) {
    std::lock_guard<std::mutex> lock(mu_);
    families_.swap(f);
  }

 private:
  mutable std::mutex mu_;
  std::vector<prometheus::MetricFamily> families_;
};

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// --- --listen --------------------------------------------------------------------

std::string ListenAddress::bind_spec() const { return host + ":" + std::to_string(port); }

std::optional<ListenAddress> parse_listen_address(const std::string& text, std::string* err) {
  ListenAddress a;
  std::string host, port;
  if (text.starts_with("[")) {
    // Debian's civetweb (under prometheus-cpp's Exposer) is built without IPv6.
    *err = "'" + text + "': IPv6 addresses are not supported (the HTTP server is built without "
           "IPv6); use 127.0.0.1:PORT";
    return std::nullopt;
  }
  auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    *err = "'" + text + "': expected HOST:PORT, e.g. 127.0.0.1:9464";
    return std::nullopt;
  }
  host = text.substr(0, colon);
  port = text.substr(colon + 1);
  int p = -1;
  auto res = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || res.ec != std::errc() || res.ptr != port.data() + port.size() || p < 0 ||
      p > 65535) {
    *err = "'" + text + "': the port must be a number from 0 to 65535";
    return std::nullopt;
  }
  a.port = p;
  a.host = host;
  in_addr in4{};
  if (::inet_pton(AF_INET, host.c_str(), &in4) != 1) {
    *err = "'" + text + "': the host must be a numeric IPv4 address, e.g. 127.0.0.1";
    return std::nullopt;
  }
  a.loopback = (ntohl(in4.s_addr) >> 24) == 127;
  return a;
}

struct LiveEndpoint::Impl {
  std::shared_ptr<Snapshot> snapshot = std::make_shared<Snapshot>();
  std::unique_ptr<prometheus::Exposer> exposer;
};

LiveEndpoint::LiveEndpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LiveEndpoint::~LiveEndpoint() {
  if (impl_ && impl_->exposer) impl_->exposer->RemoveCollectable(impl_->snapshot);
}

std::unique_ptr<LiveEndpoint> LiveEndpoint::start(const ListenAddress& a, std::string* err) {
  auto impl = std::make_unique<Impl>();
  // The server's threads inherit this thread's signal mask: with every signal
  // blocked there, SIGINT / SIGTERM reach the harness thread, whose waitpid()
  // they must interrupt to stop the run (harness/run.cc).
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old);
  struct Restore {
    sigset_t* old;
    ~Restore() { ::pthread_sigmask(SIG_SETMASK, old, nullptr); }
  } restore{&old};
  try {
    // Exactly this address: civetweb binds it with SO_REUSEADDR only, so a
    // port another server listens on fails here rather than being shared.
    impl->exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
        "listening_ports", a.bind_spec(), "num_threads", "2"});
  } catch (const std::exception& e) {
    *err = "cannot listen on " + a.bind_spec() + " (is the port in use?): " + e.what();
    return nullptr;
  }
  impl->exposer->RegisterCollectable(impl->snapshot);
  return std::unique_ptr<LiveEndpoint>(new LiveEndpoint(std::move(impl)));
}

int LiveEndpoint::port() const {
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

void LiveEndpoint::set(const std::vector<MetricFamily>& families) {
  impl_->snapshot->set(to_prometheus(families));
}

// --- the wiring --------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> push_grouping(const harness::RunResult& r) {
  return {{"subject", r.subject},
          {"instance", "shard-" + std::to_string(r.shard_index) + "-of-" + std::to_string(r.shard_count)}};
}

std::shared_ptr<LiveReporting> LiveReporting::start(const LiveOptions& o, std::string* err,
                                                    int* rc) {
  std::shared_ptr<LiveReporting> live(new LiveReporting());
  *rc = 2;
  if (!o.pushgateway.empty()) {
    live->push_ = parse_pushgateway_url(o.pushgateway, err);
    if (!live->push_) {
      *err = "--pushgateway " + *err;
      return nullptr;
    }
    live->push_url_ = live->push_->url;
    harness::MsRange d;
    std::string why;
    if (!harness::parse_range_text(o.push_timeout, &d, &why) || d.min != d.max ||
        d.min.count() <= 0 || d.min > std::chrono::minutes(10)) {
      *err = "--push-timeout '" + o.push_timeout +
             "': " + (why.empty() ? "must be one duration in 1ms..10m, e.g. 10s" : why);
      return nullptr;
    }
    live->push_timeout_s_ = d.min.count() / 1000.0;
  }
  if (!o.listen.empty()) {
    auto a = parse_listen_address(o.listen, err);
    if (!a) {
      *err = "--listen " + *err;
      return nullptr;
    }
    if (!a->loopback && !o.listen_any) {
      *err = "--listen " + o.listen +
             ": not a loopback address; /metrics would be reachable from other machines. "
             "Pass --listen-any as well if that is what you want";
      return nullptr;
    }
    live->endpoint_ = LiveEndpoint::start(*a, err);
    if (!live->endpoint_) {
      *rc = 3;
      return nullptr;
    }
    // Before the first trial: the families exist, with nothing counted yet.
    MetricsOptions mo;
    mo.in_progress = true;
    live->endpoint_->set(metrics_families(harness::RunTally(), o.subject, 0, mo));
    std::printf("metrics: serving http://%s/metrics\n",
                ListenAddress{a->host, live->endpoint_->port(), a->loopback}.bind_spec().c_str());
    std::fflush(stdout);
  }
  return live;
}

LiveReporting::~LiveReporting() = default;

void LiveReporting::trial_finished(const harness::TrialResult&, const harness::RunResult& so_far) {
  if (!endpoint_) return;
  MetricsOptions mo;
  mo.in_progress = true;
  endpoint_->set(metrics_families(so_far, mo));
}

int LiveReporting::finish(const harness::RunResult& r, int exit_code) {
  MetricsOptions mo;
  mo.now_s = unix_now();
  mo.exit_code = exit_code;
  // No previous timestamps: on a failed run last_success is simply not sent,
  // so the gateway (POST) keeps the one it has.
  const auto families = metrics_families(r, mo);
  if (endpoint_) endpoint_->set(families);
  if (push_) {
    const std::string path = push_path(*push_, "shmstress", push_grouping(r));
    std::string err;
    if (http_push(*push_, "POST", path, metrics_text(families), push_timeout_s_, &err)) {
      std::printf("pushgateway: pushed to %s%s\n", push_url_.c_str(), path.substr(push_->path_prefix.size()).c_str());
    } else {
      std::fprintf(stderr,
                   "shmstress: warning: push to the Pushgateway %s failed: %s (the exit code is "
                   "the run's, %d)\n",
                   push_url_.c_str(), err.c_str(), exit_code);
    }
    std::fflush(stdout);
  }
  endpoint_.reset();  // stop serving now, not at exit
  return exit_code;
}

}  // namespace reports
