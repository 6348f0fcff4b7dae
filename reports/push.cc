// The Pushgateway push: one HTTP/1.1 request over a plain socket, with one
// deadline over name resolution (getaddrinfo_a), connect, send and the reply,
// so an unreachable or hung gateway costs at most --push-timeout.
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "reports/live.h"

namespace reports {
namespace {

using Clock = std::chrono::steady_clock;

std::string base64(std::string_view in, bool url) {
  const char* abc = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                        : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8 |
                 static_cast<unsigned char>(in[i + 2]);
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += abc[v >> 6 & 63];
    out += abc[v & 63];
  }
  if (i + 1 == in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8;
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += abc[v >> 6 & 63];
    out += '=';
  }
  return out;
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool plain(std::string_view v) {
  if (v.empty()) return false;
  for (char c : v) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

std::string segment(const std::string& name, const std::string& value) {
  if (plain(value)) return name + "/" + value;
  // The Pushgateway reads an empty value only base64-encoded, as "=".
  return name + "@base64/" + (value.empty() ? "=" : base64(value, true));
}

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events` or the deadline passes.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Resolves host:port within the deadline. A lookup still running at the
// deadline is cancelled if it can be; if not, its request is left to finish
// on glibc's thread (and leaked: it may still write into it).
addrinfo* resolve(const PushTarget& t, Clock::time_point deadline, std::string* err) {
  struct Request {
    std::string host, port;
    addrinfo hints{};
    gaicb cb{};
  };
  auto* req = new Request{t.host, t.port, {}, {}};
  req->hints.ai_family = AF_UNSPEC;
  req->hints.ai_socktype = SOCK_STREAM;
  req->cb.ar_name = req->host.c_str();
  req->cb.ar_service = req->port.c_str();
  req->cb.ar_request = &req->hints;
  gaicb* list[1] = {&req->cb};
  if (int rc = ::getaddrinfo_a(GAI_NOWAIT, list, 1, nullptr); rc != 0) {
    *err = std::string("cannot resolve ") + t.host + ": " + ::gai_strerror(rc);
    delete req;
    return nullptr;
  }
  for (;;) {
    int left = ms_left(deadline);
    timespec ts{left / 1000, (left % 1000) * 1000000L};
    int rc = ::gai_suspend(list, 1, &ts);
    if (rc == EAI_INTR) continue;
    if (::gai_error(&req->cb) != EAI_INPROGRESS) break;
    if (left == 0 || rc == EAI_AGAIN) {
      if (::gai_cancel(&req->cb) == EAI_CANCELED) delete req;
      *err = "timed out resolving " + t.host;
      return nullptr;
    }
  }
  int rc = ::gai_error(&req->cb);
  addrinfo* res = req->cb.ar_result;
  delete req;
  if (rc != 0) {
    *err = std::string("cannot resolve ") + t.host + ": " + ::gai_strerror(rc);
    return nullptr;
  }
  return res;
}

// A connected non-blocking socket, or -1.
int connect_to(addrinfo* list, const PushTarget& t, Clock::time_point deadline, std::string* err) {
  std::string why = "no address";
  for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) return fd;
    if (errno == EINPROGRESS) {
      if (!wait_fd(fd, POLLOUT, deadline)) {
        ::close(fd);
        *err = "timed out connecting to " + t.host + ":" + t.port;
        return -1;
      }
      int so = 0;
      socklen_t len = sizeof so;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &len) == 0 && so == 0) return fd;
      why = std::strerror(so != 0 ? so : errno);
    } else {
      why = std::strerror(errno);
    }
    ::close(fd);
  }
  *err = "cannot connect to " + t.host + ":" + t.port + ": " + why;
  return -1;
}

}  // namespace

std::optional<PushTarget> parse_pushgateway_url(const std::string& url, std::string* err) {
  PushTarget t;
  const std::string scheme = "http://";
  if (!url.starts_with(scheme)) {
    *err = "'" + url + "': expected http://HOST[:PORT][/PATH]" +
           (url.starts_with("https://") ? " (https is not supported: push through a local "
                                          "TLS-terminating proxy, or use --metrics-file)"
                                        : "");
    return std::nullopt;
  }
  std::string rest = url.substr(scheme.size());
  std::string authority = rest.substr(0, rest.find('/'));
  std::string path = rest.size() > authority.size() ? rest.substr(authority.size()) : "";
  while (path.ends_with("/")) path.pop_back();
  if (path.find_first_of("?#") != std::string::npos) {
    *err = "'" + url + "': no query or fragment, please";
    return std::nullopt;
  }
  if (auto at = authority.rfind('@'); at != std::string::npos) {
    t.basic_auth = base64(percent_decode(authority.substr(0, at)), false);
    authority = authority.substr(at + 1);
  }
  std::string host = authority, port = "80";
  if (authority.starts_with("[")) {
    auto close = authority.find(']');
    if (close == std::string::npos) {
      *err = "'" + url + "': unclosed [";
      return std::nullopt;
    }
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') {
        *err = "'" + url + "': expected :PORT after ]";
        return std::nullopt;
      }
      port = authority.substr(close + 2);
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  int p = 0;
  auto res = std::from_chars(port.data(), port.data() + port.size(), p);
  if (host.empty() || port.empty() || res.ec != std::errc() ||
      res.ptr != port.data() + port.size() || p < 1 || p > 65535) {
    *err = "'" + url + "': expected http://HOST[:PORT][/PATH] with a port from 1 to 65535";
    return std::nullopt;
  }
  t.host = host;
  t.port = port;
  t.path_prefix = path;
  t.url = scheme + (authority.starts_with("[") ? "[" + host + "]" : host) + ":" + port + path;
  return t;
}

std::string push_path(const PushTarget& t, const std::string& job,
                      const std::vector<std::pair<std::string, std::string>>& grouping) {
  std::string path = t.path_prefix + "/metrics/" + segment("job", job);
  for (const auto& [name, value] : grouping) path += "/" + segment(name, value);
  return path;
}

bool http_push(const PushTarget& t, const std::string& method, const std::string& path,
               const std::string& body, double timeout_s, std::string* err) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  addrinfo* addrs = resolve(t, deadline, err);
  if (addrs == nullptr) return false;
  int fd = connect_to(addrs, t, deadline, err);
  ::freeaddrinfo(addrs);
  if (fd < 0) return false;

  const bool v6 = t.host.find(':') != std::string::npos;
  std::string req = method + " " + path + " HTTP/1.1\r\n";
  req += "Host: " + (v6 ? "[" + t.host + "]" : t.host) + ":" + t.port + "\r\n";
  req += "User-Agent: shmstress\r\n";
  req += "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";
  req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!t.basic_auth.empty()) req += "Authorization: Basic " + t.basic_auth + "\r\n";
  req += "Connection: close\r\n\r\n";
  req += body;

  auto fail = [&](std::string why) {
    ::close(fd);
    *err = std::move(why);
    return false;
  };
  for (std::size_t sent = 0; sent < req.size();) {
    if (!wait_fd(fd, POLLOUT, deadline)) return fail("timed out sending to " + t.host + ":" + t.port);
    ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return fail(std::string("send: ") + std::strerror(errno));
    sent += static_cast<std::size_t>(n);
  }
  // The reply: read until the status line and headers are in and the body is
  // complete (Content-Length), or the server closes. Kept to 64 KiB.
  std::string reply;
  std::size_t header_end = std::string::npos, want = std::string::npos;
  for (;;) {
    if (header_end != std::string::npos && want != std::string::npos && reply.size() >= want) break;
    if (!wait_fd(fd, POLLIN, deadline)) return fail("timed out waiting for the reply of " + t.host + ":" + t.port);
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return fail(std::string("recv: ") + std::strerror(errno));
    if (n == 0) break;
    if (reply.size() < 65536) reply.append(buf, static_cast<std::size_t>(n));
    if (header_end == std::string::npos && (header_end = reply.find("\r\n\r\n")) != std::string::npos) {
      std::string lower = reply.substr(0, header_end);
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (auto cl = lower.find("\r\ncontent-length:"); cl != std::string::npos) {
        want = header_end + 4 + std::strtoull(lower.c_str() + cl + 17, nullptr, 10);
      }
    }
  }
  ::close(fd);
  int status = 0;
  if (reply.starts_with("HTTP/1.") && reply.size() >= 12) {
    std::from_chars(reply.data() + 9, reply.data() + 12, status);
  }
  if (status >= 200 && status < 300) return true;
  if (status == 0) {
    *err = "no HTTP reply from " + t.host + ":" + t.port;
    return false;
  }
  std::string text = header_end != std::string::npos ? reply.substr(header_end + 4) : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (auto nl = text.find('\n'); nl != std::string::npos) text = text.substr(0, nl);
  *err = "HTTP " + std::to_string(status) + (text.empty() ? "" : ": " + text.substr(0, 300));
  return false;
}

}  // namespace reports
