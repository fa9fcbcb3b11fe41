// `ecoserve timeline`: fetch GET /admin/timeline from a running server (or read a
// saved one) and draw one lane per instance (prefill and decode work in different
// colours) as SVG, and print how the instances shared prompt work over time.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "apps/ecoserve/commands.h"
#include "loadgen/bench_runner.h"
#include "loadgen/server_url.h"
#include "loadgen/timeline_summary.h"
#include "loadgen/timeline_svg.h"

namespace ecoserve::apps {

namespace {

struct TimelineArgs {
  std::string url = "http://127.0.0.1:8000";
  double seconds = 10.0;
  std::string output;
  std::optional<std::string> api_key;
  std::string json_output;
  std::string from;
};

StatusOr<nlohmann::json> fetch_timeline(const TimelineArgs& a) {
  if (!a.from.empty()) {
    std::ifstream in(a.from, std::ios::binary);
    if (!in) return not_found_error("cannot read {}", a.from);
    auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded()) return invalid_argument_error("{} is not JSON", a.from);
    return j;
  }
  auto url = loadgen::ServerUrl::parse(a.url);
  if (!url.ok()) return url.status();
  auto key = loadgen::choose_api_key(a.api_key, std::getenv("OPENAI_API_KEY"));
  if (!key.ok()) return key.status();
  const std::string target = fmt::format("/admin/timeline?seconds={:g}", a.seconds);
  auto body = loadgen::http_get(*url, target, key->key);
  if (!body.ok()) return body.status();
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded()) return invalid_argument_error("GET {}{} did not return JSON", a.url, target);
  return j;
}

int run_timeline(const TimelineArgs& a) {
  auto j = fetch_timeline(a);
  if (!j.ok()) {
    std::fprintf(stderr, "error: %s\n", j.status().message().c_str());
    return 1;
  }
  auto summary = loadgen::summarize_timeline(*j);
  if (!summary.ok()) {
    std::fprintf(stderr, "error: %s\n", summary.status().message().c_str());
    return 1;
  }
  if (!a.output.empty()) {
    const std::string title = a.from.empty() ? fmt::format("ecoserve timeline: {}, last {:g} s", a.url, a.seconds)
                                             : fmt::format("ecoserve timeline: {}", a.from);
    auto svg = loadgen::render_timeline_svg(*j, title);
    if (!svg.ok()) {
      std::fprintf(stderr, "error: %s\n", svg.status().message().c_str());
      return 1;
    }
    std::ofstream out(a.output, std::ios::binary);
    out << *svg;
    if (!out) {
      std::fprintf(stderr, "error: cannot write %s\n", a.output.c_str());
      return 1;
    }
    size_t steps = 0;
    for (const auto& inst : (*j)["instances"]) steps += inst["steps"].size();
    std::printf("wrote %s: %zu instance(s), %zu steps\n", a.output.c_str(), (*j)["instances"].size(), steps);
  }
  if (!a.json_output.empty()) std::ofstream(a.json_output) << j->dump(1) << "\n";
  std::fputs(loadgen::format_timeline_summary(*summary).c_str(), stdout);
  return 0;
}

}  // namespace

void add_timeline_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TimelineArgs>();
  auto* cmd = app.add_subcommand("timeline",
                                 "Draw the recent engine steps of a running server's instances (GET /admin/timeline) as "
                                 "an SVG (one lane per instance, prefill work in orange, decode work in blue, padg "
                                 "phases as bands) and print each instance's share of prompt work and how often "
                                 "several instances ran prompt work at once (staggered under padg).");
  cmd->add_option("--url", a->url, "server base URL")->capture_default_str();
  cmd->add_option("--seconds", a->seconds, "how far back to look (at most 3600)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("-o,--output", a->output, "SVG file to write (without it, only the summary is printed)");
  cmd->add_option("--from", a->from, "read a saved timeline JSON (e.g. from --json) instead of asking a server")
      ->check(CLI::ExistingFile);
  cmd->add_option("--json", a->json_output, "also write the fetched timeline JSON here");
  cmd->add_option("--api-key", a->api_key,
                  "send 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY when set); /admin/* needs the server's key");
  cmd->callback([a, &exit_code] { exit_code = run_timeline(*a); });
}

}  // namespace ecoserve::apps
