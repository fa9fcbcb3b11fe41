// `ecoserve timeline`: fetch GET /admin/timeline from a running server and draw
// one lane per instance (prefill and decode work in different colours) as SVG.
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
#include "loadgen/timeline_svg.h"

namespace ecoserve::apps {

namespace {

struct TimelineArgs {
  std::string url = "http://127.0.0.1:8000";
  double seconds = 10.0;
  std::string output;
  std::optional<std::string> api_key;
  std::string json_output;
};

int run_timeline(const TimelineArgs& a) {
  auto url = loadgen::ServerUrl::parse(a.url);
  if (!url.ok()) {
    std::fprintf(stderr, "error: %s\n", url.status().message().c_str());
    return 1;
  }
  auto key = loadgen::choose_api_key(a.api_key, std::getenv("OPENAI_API_KEY"));
  if (!key.ok()) {
    std::fprintf(stderr, "error: %s\n", key.status().message().c_str());
    return 1;
  }
  const std::string target = fmt::format("/admin/timeline?seconds={:g}", a.seconds);
  auto body = loadgen::http_get(*url, target, key->key);
  if (!body.ok()) {
    std::fprintf(stderr, "error: %s\n", body.status().message().c_str());
    return 1;
  }
  auto j = nlohmann::json::parse(*body, nullptr, false);
  if (j.is_discarded()) {
    std::fprintf(stderr, "error: GET %s%s did not return JSON\n", a.url.c_str(), target.c_str());
    return 1;
  }
  auto svg = loadgen::render_timeline_svg(j, fmt::format("ecoserve timeline: {}, last {:g} s", a.url, a.seconds));
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
  if (!a.json_output.empty()) std::ofstream(a.json_output) << j.dump(1) << "\n";
  size_t steps = 0;
  for (const auto& inst : j["instances"]) steps += inst["steps"].size();
  std::printf("wrote %s: %zu instance(s), %zu steps\n", a.output.c_str(), j["instances"].size(), steps);
  return 0;
}

}  // namespace

void add_timeline_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TimelineArgs>();
  auto* cmd = app.add_subcommand("timeline",
                                 "Draw the recent engine steps of a running server's instances (GET /admin/timeline) as "
                                 "an SVG: one lane per instance, prefill work in orange, decode work in blue.");
  cmd->add_option("--url", a->url, "server base URL")->capture_default_str();
  cmd->add_option("--seconds", a->seconds, "how far back to look (at most 3600)")
      ->capture_default_str()
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("-o,--output", a->output, "SVG file to write")->required();
  cmd->add_option("--json", a->json_output, "also write the fetched timeline JSON here");
  cmd->add_option("--api-key", a->api_key,
                  "send 'Authorization: Bearer KEY' (default: $OPENAI_API_KEY when set); /admin/* needs the server's key");
  cmd->callback([a, &exit_code] { exit_code = run_timeline(*a); });
}

}  // namespace ecoserve::apps
