// Opening a page in headless Chromium (Debian's `chromium`) and reading back its self-check:
// the page, opened with #selftest, writes "PASS ..." or "FAIL ..." into <pre id="selftest">,
// which Chromium's --dump-dom prints. Tests skip, with a message, only when Chromium is absent.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

namespace ember::test {

// The chromium program on PATH, or "".
inline std::string chromium_path() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const std::string candidate = dir + "/" + name;
      if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return "";
}

#define EMBER_SKIP_WITHOUT_CHROMIUM()                                                       \
  do {                                                                                      \
    if (::ember::test::chromium_path().empty())                                             \
      GTEST_SKIP() << "chromium is not installed (scripts/setup installs it): the browser " \
                      "test of this page is skipped, not passed";                           \
  } while (0)

// What the page at `file` (an absolute path) wrote into <pre id="selftest"> after loading with
// #selftest, with HTML entities of the dump left as they are; or a message saying what failed.
inline std::string run_selftest(const std::string& file) {
  // A profile in the system's temporary directory ($TMPDIR, else /tmp).
  std::string dir_template =
      (std::filesystem::temp_directory_path() / "ember_chromium_XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) return "FAIL: cannot make a profile directory";
  const std::string profile = dir_template;
  // --no-sandbox: CI runs as root, where Chromium refuses its sandbox. A profile of its own, so
  // tests running in parallel do not share one. The virtual time budget lets the page's scripts
  // run to the end before the DOM is dumped.
  const std::string command = chromium_path() +
                              " --headless --no-sandbox --disable-gpu --no-first-run "
                              "--user-data-dir=" +
                              profile + " --virtual-time-budget=10000 --dump-dom 'file://" + file +
                              "#selftest' 2>/dev/null";
  std::string out;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 65536> buffer;
    std::size_t n = 0;
    while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) out.append(buffer.data(), n);
    pclose(pipe);
  }
  std::error_code ec;
  std::filesystem::remove_all(profile, ec);
  const std::string open = "<pre id=\"selftest\">";
  const auto start = out.find(open);
  if (start == std::string::npos) {
    return "FAIL: no <pre id=\"selftest\"> in Chromium's DOM dump (" + std::to_string(out.size()) +
           " bytes): " + out.substr(0, 300);
  }
  const auto end = out.find("</pre>", start);
  return out.substr(start + open.size(), end - start - open.size());
}

}  // namespace ember::test
