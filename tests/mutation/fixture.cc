#include <atomic>  // a < b in a preprocessor line
#define LIMIT(a) ((a) < 10 && (a) != 0)
namespace demo {
constexpr int kSlots = 64;
constexpr auto kPoll = std::chrono::milliseconds(20);
// a comment: if (a < b) return 1; foo(); x == y
/* a block: a > b || c >= d */
const char* kText = "a < b && c == d; return 0;";
const char kQuote = '<';
int f(int a, int b, std::atomic<int>& w, std::vector<int> v) {
  if (a <= 10) return 1;
  if (errno == EINTR || b != 0) {
    return 2;
  }
  w.store(a, std::memory_order_release);
  notify(a, "x > y");
  if (int e = failpoint::check("f/g")) return e + (a < b);
  return a >= b;
}
}  // namespace demo
