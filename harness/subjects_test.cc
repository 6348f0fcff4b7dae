// A subject's program is checked once, before the first trial, the way the
// supervisor's execve will see it; a scenario naming a bad subject is an
// error with its file and line; two scenarios of one name cannot share a run.
#include "subjects.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "run.h"

namespace harness {
namespace {

namespace fs = std::filesystem;

class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "shmstress-subjects-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name, const std::string& text, mode_t mode = 0644) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << text;
    ::chmod(p.c_str(), mode);
    return p;
  }

 private:
  std::string path_;
};

std::string ProgramError(const std::vector<std::string>& argv) {
  std::string why;
  EXPECT_FALSE(check_program(argv, &why));
  return why;
}

TEST(CheckProgram, AnExecutableBinaryOrScriptPasses) {
  std::string why;
  EXPECT_TRUE(check_program({"/bin/sh", "-c", "true"}, &why)) << why;
  ScratchDir d;
  EXPECT_TRUE(check_program({d.file("ok.sh", "#!/bin/sh\nexit 0\n", 0755)}, &why)) << why;
  EXPECT_TRUE(check_program({d.file("ok2.sh", "#! /bin/sh -e\nexit 0\n", 0755)}, &why)) << why;
}

TEST(CheckProgram, AMissingProgramIsNamed) {
  EXPECT_EQ(ProgramError({"/nonexistent", "x"}), "/nonexistent: No such file or directory");
  EXPECT_EQ(ProgramError({}), "no program to run");
}

TEST(CheckProgram, ABareNameIsNotSearchedOnPathButThePathIsSuggested) {
  // execve("sh") looks in the working directory only.
  EXPECT_EQ(ProgramError({"sh"}).rfind("'sh' is not a path to a program: workers are started with "
                                       "execve, which does not search PATH; write /",
                                       0),
            0u);
  EXPECT_EQ(ProgramError({"no-such-program-anywhere"}),
            "no-such-program-anywhere: No such file or directory");
}

TEST(CheckProgram, ADirectoryOrANonExecutableFileIsRefused) {
  EXPECT_EQ(ProgramError({"/tmp"}), "/tmp: not a regular file");
  ScratchDir d;
  const std::string plain = d.file("plain", "#!/bin/sh\n", 0644);
  // Root too: execve (and access(X_OK)) needs some execute bit even for root.
  EXPECT_EQ(ProgramError({plain}), plain + ": not executable (Permission denied)");
}

TEST(CheckProgram, AScriptWhoseInterpreterIsMissingIsRefused) {
  ScratchDir d;
  const std::string s = d.file("bad.sh", "#!/nonexistent/python9\nprint(1)\n", 0755);
  EXPECT_EQ(ProgramError({s}), s + ": its interpreter /nonexistent/python9: No such file or directory");
  const std::string empty = d.file("empty.sh", "#!\n", 0755);
  EXPECT_EQ(ProgramError({empty}), empty + ": its \"#!\" line names no interpreter");
}

TEST(CheckProgram, AnExecutableTextFileWithoutShebangIsRefused) {
  ScratchDir d;
  const std::string s = d.file("text", "echo hi\n", 0755);
  EXPECT_EQ(ProgramError({s}), s + ": neither an ELF binary nor a \"#!\" script (execve would "
                                   "fail: Exec format error)");
}

TEST(ResolveSubject, ExecOfANonexistentProgramIsRefusedBeforeAnyTrial) {
  std::string why;
  EXPECT_FALSE(resolve_subject("exec:/nonexistent --flag", {}, &why));
  EXPECT_EQ(why, "subject 'exec:/nonexistent --flag': /nonexistent: No such file or directory");
  EXPECT_FALSE(resolve_subject("exec:", {}, &why));
  EXPECT_EQ(why, "subject exec: needs a command, e.g. exec:/usr/bin/python3 adapter.py");
  EXPECT_FALSE(resolve_subject("exec:   ", {}, &why));
}

TEST(ResolveSubject, ANamedSubjectsShmSizeIsCheckedAndPassedOn) {
  ScratchDir d;
  const std::string scenario = d.file("s.toml", "[[job]]\nranks = 1\n");
  const fs::path root = fs::path(scenario).parent_path() / "subjects";
  fs::create_directories(root / "roomy");
  fs::create_directories(root / "greedy");
  std::ofstream(root / "roomy" / "subject.toml") << "command = \"/bin/sh\"\nshm_size = \"4g\"\n";
  std::ofstream(root / "greedy" / "subject.toml") << "command = \"/bin/sh\"\nshm_size = \"lots\"\n";
  std::string why;
  auto roomy = resolve_subject("roomy", {scenario}, &why);
  ASSERT_TRUE(roomy) << why;
  EXPECT_EQ(roomy->shm_size, "4g");
  EXPECT_FALSE(resolve_subject("greedy", {scenario}, &why));
  EXPECT_NE(why.find("shm_size \"lots\" is not a tmpfs size like \"4g\""), std::string::npos) << why;
  EXPECT_EQ(resolve_subject("native", {}, &why)->shm_size, "");
}

TEST(ValidTmpfsSize, FromOnePageToSixtyFourGigabytes) {
  EXPECT_TRUE(valid_tmpfs_size("4k"));
  EXPECT_TRUE(valid_tmpfs_size("4g"));
  EXPECT_TRUE(valid_tmpfs_size("64g"));
  EXPECT_TRUE(valid_tmpfs_size("1048576"));
  EXPECT_FALSE(valid_tmpfs_size("3k"));
  EXPECT_FALSE(valid_tmpfs_size("65g"));
  EXPECT_FALSE(valid_tmpfs_size("4t"));
  EXPECT_FALSE(valid_tmpfs_size("g"));
  EXPECT_FALSE(valid_tmpfs_size(""));
  EXPECT_FALSE(valid_tmpfs_size("4g,mode=777"));
}

TEST(LoadAndValidate, ASubjectThatCannotRunIsAnErrorAtItsLine) {
  ScratchDir d;
  const std::string f =
      d.file("s.toml", "name = \"s\"\n\nsubject = \"exec:/nonexistent\"\n[[job]]\nranks = 1\n");
  std::vector<Scenario> out;
  std::string err;
  EXPECT_FALSE(load_and_validate({f}, &out, &err));
  EXPECT_EQ(err, f + ":3: subject 'exec:/nonexistent': /nonexistent: No such file or directory");
  const std::string g = d.file("g.toml", "subject = \"nosuch\"\n[[job]]\nranks = 1\n");
  EXPECT_FALSE(load_and_validate({g}, &out, &err));
  EXPECT_EQ(err.rfind(g + ":1: unknown subject 'nosuch'", 0), 0u) << err;
}

TEST(LoadAndValidate, TwoScenariosOfOneNameWouldShareTrialDirsAndAreRefused) {
  ScratchDir d;
  const std::string a = d.file("a.toml", "name = \"same\"\n[[job]]\nranks = 1\n");
  const std::string b = d.file("b.toml", "name = \"same\"\n[[job]]\nranks = 2\n");
  std::vector<Scenario> out;
  std::string err;
  EXPECT_FALSE(load_and_validate({a, b}, &out, &err));
  EXPECT_EQ(err, b + ": scenario name 'same' is also " + a +
                     "'s: their trial dirs would collide (set a different 'name', or give the "
                     "file once)");
  out.clear();
  EXPECT_FALSE(load_and_validate({a, a}, &out, &err));
}

TEST(LoadAndValidate, AnUnknownInvariantIsAnErrorAtItsEntrysLine) {
  ScratchDir d;
  const std::string f = d.file(
      "s.toml", "invariants = [\n  \"prefix.unique\",\n  \"prefix.uniqe\",\n]\n[[job]]\nranks = 1\n");
  std::vector<Scenario> out;
  std::string err;
  EXPECT_FALSE(load_and_validate({f}, &out, &err));
  EXPECT_EQ(err.rfind(f + ":3: 'invariants' names unknown invariant \"prefix.uniqe\"", 0), 0u) << err;
}

TEST(LoadAndValidate, AnExpectedStateNothingReportsIsRefusedBeforeAnyTrial) {
  ScratchDir d;
  std::vector<Scenario> out;
  std::string err;
  const std::string f =
      d.file("s.toml", "name = \"s\"\nexpect_reached = [\"killed-holding-prefix\", \"no-such-state\"]\n"
                       "[[job]]\nranks = 1\n");
  EXPECT_FALSE(load_and_validate({f}, &out, &err));
  EXPECT_EQ(err.rfind(f + ":2: 'expect_reached' names \"no-such-state\", which no trial can reach", 0), 0u) << err;
  const std::string g = d.file("g.toml", "expect_reached = [\"fault:nosuchkind\"]\n[[job]]\nranks = 1\n");
  EXPECT_FALSE(load_and_validate({g}, &out, &err));
  EXPECT_EQ(err.rfind(g + ":1: 'fault:nosuchkind' names an unknown fault kind", 0), 0u) << err;
  const std::string h = d.file("h.toml", "expect_reached = [\"error:acquire\"]\n[[job]]\nranks = 1\n");
  EXPECT_FALSE(load_and_validate({h}, &out, &err));
  EXPECT_EQ(err.rfind(h + ":1: 'expect_reached' names \"error:acquire\", which no trial can reach: expected error:<op>:<code>", 0), 0u) << err;
}

TEST(LoadAndValidate, EveryKindOfReportableStateIsAccepted) {
  ScratchDir d;
  std::vector<Scenario> out;
  std::string err;
  const std::string f = d.file(
      "s.toml", "expect_reached = [\"killed-holding-prefix\", \"fault:sigkill\", \"error:acquire:in-use\", "
                "\"subject-unavailable\", \"foreign-entry-kept\"]\n[[job]]\nranks = 1\n");
  EXPECT_TRUE(load_and_validate({f}, &out, &err)) << err;
}

}  // namespace
}  // namespace harness
