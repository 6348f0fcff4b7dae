// EventLog never drops an event: what does not fit in one atomic write is
// split into continuation lines that build_history merges back whole.
#include "events.h"

#include <gtest/gtest.h>
#include <limits.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "history.h"

namespace harness {
namespace {

using Json = nlohmann::json;

Json CleanOk(int names, std::size_t name_len = 40) {
  Json removed = Json::array();
  for (int i = 0; i < names; ++i) {
    std::string n = "/shmstress.t" + std::to_string(i) + "." + std::string(name_len, 'x');
    removed.push_back(n);
  }
  return Json{{"t", 5},   {"type", "ok"}, {"op", "clean"}, {"id", 1},
              {"job", 0}, {"rank", 0},    {"pid", 42},     {"local_rank", 0},
              {"value", {{"removed", removed}, {"kept", {"/k1", "/k2"}}, {"skipped", Json::array()}}}};
}

TEST(SplitEvent, ALineThatFitsIsWrittenWholeAsOneLine) {
  auto lines = split_event(CleanOk(3), PIPE_BUF);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].back(), '\n');
  EXPECT_EQ(lines[0].find("continues"), std::string::npos);
}

TEST(SplitEvent, ACleanThatRemoved110NamesIsSplitAndMergesBackWhole) {
  const Json whole = CleanOk(110);
  auto lines = split_event(whole, PIPE_BUF);
  ASSERT_GT(lines.size(), 1u);
  std::string text;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_LE(lines[i].size(), static_cast<std::size_t>(PIPE_BUF));
    Json j = Json::parse(lines[i]);
    EXPECT_EQ(j.value("continues", false), i + 1 < lines.size()) << i;
    EXPECT_FALSE(j.contains("truncated"));
    text += lines[i];
  }
  std::vector<std::string> errors;
  Json invoke = {{"t", 1}, {"type", "invoke"}, {"op", "clean"}, {"id", 1},
                 {"job", 0}, {"rank", 0},      {"pid", 42},     {"args", Json::object()}};
  auto events = parse_jsonl(invoke.dump() + "\n" + text, &errors);
  History h = build_history(events, TrialMeta{}, &errors);
  EXPECT_TRUE(errors.empty()) << errors.front();
  ASSERT_EQ(h.ops.size(), 1u);
  EXPECT_EQ(h.ops[0].outcome, Outcome::kOk);
  EXPECT_EQ(h.ops[0].removed, whole["value"]["removed"].get<std::vector<std::string>>());
  EXPECT_EQ(h.ops[0].kept, (std::vector<std::string>{"/k1", "/k2"}));  // counted once
  EXPECT_FALSE(h.ops[0].truncated);
}

TEST(SplitEvent, AStringLongerThanALineIsCutAndMarkedTruncated) {
  Json e = {{"t", 1}, {"type", "fail"}, {"op", "acquire"}, {"id", 1}, {"job", 0}, {"rank", 0},
            {"pid", 42}, {"error", {{"code", "io"}, {"message", std::string(10000, 'm')}}}};
  auto lines = split_event(e, PIPE_BUF);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(lines[0].size(), static_cast<std::size_t>(PIPE_BUF));
  Json j = Json::parse(lines[0]);
  EXPECT_TRUE(j.value("truncated", false));
  EXPECT_EQ(j["error"]["code"], "io");
}

TEST(EventLog, EmitWritesEveryNameOfAHugeResult) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("events_test_" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  {
    EventLog log(path);
    ASSERT_TRUE(log.ok());
    log.emit(CleanOk(2000, 100));
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  std::vector<std::string> errors;
  auto events = parse_jsonl(text.str(), &errors);
  EXPECT_TRUE(errors.empty());
  Json merged = events.front();
  for (std::size_t i = 1; i < events.size(); ++i) merge_continuation(merged, events[i]);
  EXPECT_EQ(merged["value"]["removed"].size(), 2000u);
  EXPECT_GT(events.size(), 50u);
}

TEST(EventLog, PagePaddingKeepsALineInsideThePageItStartsIn) {
  EXPECT_EQ(page_padding(0, 100, 4096), 0u);
  EXPECT_EQ(page_padding(3996, 100, 4096), 0u);   // ends exactly at the boundary
  EXPECT_EQ(page_padding(3997, 100, 4096), 99u);  // would cross by one byte: start on the next page
  EXPECT_EQ(page_padding(8191, 2, 4096), 1u);
  EXPECT_EQ(page_padding(4096, 4096, 4096), 0u);  // a whole page from a boundary
  EXPECT_EQ(page_padding(10, 5000, 4096), 0u);    // longer than a page: padding cannot help
  EXPECT_EQ(page_padding(-1, 10, 4096), 0u);
}

// A SIGKILL can stop write(2) between the pages of a regular file: every line
// the log writes must therefore lie within one page, and still parse alone.
TEST(EventLog, NoLineItWritesCrossesAPageBoundaryAndEveryLineParses) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("events_pages_" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  {
    EventLog log(path);
    ASSERT_TRUE(log.ok());
    for (int i = 0; i < 400; ++i) {
      log.emit(Json{{"type", "fds"}, {"pid", 7}, {"job", 0}, {"rank", 0}, {"count", i},
                    {"pad", std::string(static_cast<std::size_t>(i * 37 % 300), 'x')}});
    }
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  const std::string all = text.str();
  ASSERT_GT(all.size(), 4 * page);
  std::size_t start = 0, lines = 0;
  while (start < all.size()) {
    const std::size_t nl = all.find('\n', start);
    ASSERT_NE(nl, std::string::npos);
    const std::size_t first = all.find_first_not_of(' ', start);  // where the line's own bytes begin
    EXPECT_EQ(first / page, nl / page) << "a line from " << first << " to " << nl << " crosses a page boundary";
    Json j = Json::parse(all.substr(start, nl - start), nullptr, false);
    EXPECT_TRUE(j.is_object()) << all.substr(start, nl - start);
    start = nl + 1;
    ++lines;
  }
  EXPECT_EQ(lines, 400u);
  std::vector<std::string> errors;
  EXPECT_EQ(parse_jsonl(all, &errors).size(), 400u);
  EXPECT_TRUE(errors.empty());
}

}  // namespace
}  // namespace harness
