// parse_config_text: exact results for YAML and JSON settings, and the errors
// (with their line and column) for bad text, deep nesting and expanding aliases.
#include "sim/config_text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ecoserve::sim {
namespace {

using nlohmann::json;

json parse_ok(std::string_view text, ConfigFormat format = ConfigFormat::kAuto) {
  auto j = parse_config_text(text, format);
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : json();
}

std::string parse_error(std::string_view text, ConfigFormat format = ConfigFormat::kAuto,
                        const ConfigTextLimits& limits = {}) {
  auto j = parse_config_text(text, format, limits);
  if (j.ok()) return "OK: " + j->dump();
  EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
  return j.status().message();
}

TEST(ConfigTextTest, YamlScalarsBecomeTheirJsonValues) {
  const json j = parse_ok(
      "# settings\n"
      "strategy: padg\n"
      "instances: 4\n"
      "negative: -12\n"
      "rate: 6.5\n"
      "exp: 1e3\n"
      "prefix: true\n"
      "off: false\n"
      "yes_is_a_string: yes\n"
      "quoted: \"8\"\n"
      "single: '2.5'\n"
      "tagged: !!str 16\n"
      "empty:\n"
      "tilde: ~\n"
      "slo: null\n"
      "inf_rate: inf\n"
      "nan_value: nan\n"
      "too_big: 1e999\n"
      "int_overflow: 99999999999999999999\n"
      "percentiles: [90, 99, \"p\", 0.5]\n"
      "nested:\n"
      "  - a: 1\n"
      "    b: [x, {c: false}]\n"
      "block: |\n"
      "  12\n");
  const json expected = {
      {"strategy", "padg"},
      {"instances", 4},
      {"negative", -12},
      {"rate", 6.5},
      {"exp", 1000.0},
      {"prefix", true},
      {"off", false},
      {"yes_is_a_string", "yes"},
      {"quoted", "8"},
      {"single", "2.5"},
      {"tagged", "16"},
      {"empty", nullptr},
      {"tilde", nullptr},
      {"slo", nullptr},
      {"inf_rate", "inf"},
      {"nan_value", "nan"},
      {"too_big", "1e999"},
      {"int_overflow", 1e20},
      {"percentiles", {90, 99, "p", 0.5}},
      {"nested", json::array({{{"a", 1}, {"b", json::array({"x", {{"c", false}}})}}})},
      {"block", "12\n"},
  };
  EXPECT_EQ(j, expected) << j.dump();
  EXPECT_TRUE(j["instances"].is_number_integer());
  EXPECT_TRUE(j["exp"].is_number_float());
  EXPECT_TRUE(j["int_overflow"].is_number_float());
}

TEST(ConfigTextTest, DuplicateKeysLastWinsAndNullKeyIsNull) {
  EXPECT_EQ(parse_ok("a: 1\na: 2\n"), json({{"a", 2}}));
  EXPECT_EQ(parse_ok("~: 1\n"), json({{"null", 1}}));
}

TEST(ConfigTextTest, AliasesAreExpanded) {
  EXPECT_EQ(parse_ok("base: &b {tp: 2, pp: 1}\ncopy: *b\n"),
            json({{"base", {{"tp", 2}, {"pp", 1}}}, {"copy", {{"tp", 2}, {"pp", 1}}}}));
}

TEST(ConfigTextTest, JsonIsReadAsJson) {
  const std::string text = R"({"strategy": "nodg", "rate": 2.0, "seed": 18446744073709551615,
                               "n": "5", "list": [1, [2]], "flag": true, "slo": null})";
  const json j = parse_ok(text);
  EXPECT_EQ(j, json::parse(text));
  EXPECT_TRUE(j["seed"].is_number_unsigned());
  EXPECT_TRUE(j["rate"].is_number_float());
  EXPECT_EQ(parse_ok(text, ConfigFormat::kJson), j);
  // The same text read as YAML: the same values except the integer past int64.
  const json y = parse_ok(text, ConfigFormat::kYaml);
  EXPECT_EQ(y["strategy"], "nodg");
  EXPECT_EQ(y["n"], "5");
  EXPECT_EQ(y["list"], json({1, {2}}));
  EXPECT_EQ(y["slo"], nullptr);
  EXPECT_DOUBLE_EQ(y["seed"].get<double>(), 18446744073709551615.0);
  // A YAML flow map that is not JSON falls back to YAML in kAuto only.
  EXPECT_EQ(parse_ok("{strategy: padg, tp: 2}"), json({{"strategy", "padg"}, {"tp", 2}}));
  EXPECT_EQ(parse_error("{strategy: padg}", ConfigFormat::kJson),
            "parse error at line 1, column 2: syntax error while parsing object key - invalid literal; "
            "last read: '{s'; expected string literal");
}

TEST(ConfigTextTest, EmptyIsAnEmptyMap) {
  EXPECT_EQ(parse_ok(""), json::object());
  EXPECT_EQ(parse_ok("# only a comment\n"), json::object());
  EXPECT_EQ(parse_ok("null"), json::object());
  EXPECT_EQ(parse_ok("---\n"), json::object());
}

TEST(ConfigTextTest, TopLevelMustBeAMap) {
  EXPECT_EQ(parse_error("- a\n- b\n"), "line 1, column 1: the top level is a list, expected a map of settings");
  EXPECT_EQ(parse_error("just text"), "line 1, column 1: the top level is a scalar, expected a map of settings");
  EXPECT_EQ(parse_error("[1, 2]"), "the top level is a list, expected a map of settings");
  EXPECT_EQ(parse_error("42"), "the top level is a number, expected a map of settings");
}

TEST(ConfigTextTest, MalformedYamlNamesTheLine) {
  EXPECT_EQ(parse_error("strategy: padg\ntp: [1, 2\npp: 1\n"), "line 3, column 3: end of sequence flow not found");
  EXPECT_EQ(parse_error("a: 1\n b: 2\n"), "line 2, column 3: illegal map value");
  EXPECT_EQ(parse_error("a: *missing\n"), "line 1, column 4: the referenced anchor is not defined");
  EXPECT_EQ(parse_error("? [1]\n: x\n"), "line 1, column 3: a key is a list, expected a string");
  EXPECT_EQ(parse_error("a: \"\\ud800\"\n"), "line 1, column 11: invalid unicode: 55296");  // yaml-cpp's check
  EXPECT_EQ(parse_error("a: \xff\n"), "line 1, column 4: a key or string is not valid UTF-8");
}

TEST(ConfigTextTest, TooDeepIsAnError) {
  std::string yaml_ok = "a: " + std::string(63, '[') + std::string(63, ']') + "\n";
  EXPECT_TRUE(parse_config_text(yaml_ok).ok());
  std::string yaml_deep = "a: " + std::string(64, '[') + std::string(64, ']') + "\n";
  EXPECT_EQ(parse_error(yaml_deep), "line 1, column 67: maps and lists nested deeper than 64");
  // Block style, one level per line.
  std::string block;
  for (int i = 0; i < 70; ++i) block += std::string(2 * i, ' ') + "k:\n";
  EXPECT_EQ(parse_error(block), "line 65, column 129: maps and lists nested deeper than 64");
  // Far deeper than yaml-cpp's own guard (2000): its error, not a stack overflow.
  const std::string very_deep = "a: " + std::string(100000, '[');
  EXPECT_NE(parse_error(very_deep).find("line 1, column"), std::string::npos);

  std::string json_ok = "{\"a\": " + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_TRUE(parse_config_text(json_ok, ConfigFormat::kJson).ok());
  std::string json_deep = "{\"a\": \"[[\",\n \"b\": " + std::string(64, '[') + std::string(64, ']') + "}";
  EXPECT_EQ(parse_error(json_deep), "line 2, column 70: maps and lists nested deeper than 64");
  ConfigTextLimits shallow;
  shallow.max_depth = 2;
  EXPECT_EQ(parse_error("a: {b: {c: 1}}\n", ConfigFormat::kAuto, shallow),
            "line 1, column 8: maps and lists nested deeper than 2");
}

TEST(ConfigTextTest, BillionLaughsIsCapped) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 10; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    text += fmt::format("a{0}: &a{0} [{1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}, {1}]\n", i, prev);
  }
  const std::string err = parse_error(text);
  EXPECT_NE(err.find("more than 100000 keys and values (aliases expanding too far?)"), std::string::npos) << err;
  // Long strings repeated: the string budget.
  const std::string big = "s: &s " + std::string(1 << 20, 'x') + "\nl: [" + std::string("*s, ", 4) + "*s]\n";
  ConfigTextLimits small;
  small.max_string_bytes = 3 << 20;
  EXPECT_NE(parse_error(big, ConfigFormat::kYaml, small).find("more than 3145728 bytes of keys and strings"),
            std::string::npos);
  // An alias of its own ancestor loops: stopped by the depth limit.
  EXPECT_EQ(parse_error("a: &a [*a]\n"), "line 1, column 4: maps and lists nested deeper than 64");
}

TEST(ConfigTextTest, ReadsTheShippedConfigs) {
  for (const char* name : {"example.yaml", "ecoserve_l20_cluster.yaml"}) {
    const std::string path = std::string(ECOSERVE_SOURCE_DIR) + "/configs/sim/" + name;
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << path;
    std::stringstream ss;
    ss << in.rdbuf();
    auto j = parse_config_text(ss.str());
    ASSERT_TRUE(j.ok()) << name << ": " << j.status().to_string();
    EXPECT_TRUE(j->is_object());
    EXPECT_TRUE(j->contains("gpu")) << name;
    // Written back as JSON, it reads the same.
    EXPECT_EQ(*parse_config_text(j->dump()), *j) << name;
  }
  const json example = parse_ok(
      "strategy: padg\nmodel: llama-2-13b   # comment\ninstances: 4\ninter_node_gbps: 100\nrate: 6\n");
  EXPECT_EQ(example, json({{"strategy", "padg"}, {"model", "llama-2-13b"}, {"instances", 4},
                           {"inter_node_gbps", 100}, {"rate", 6}}));
}

}  // namespace
}  // namespace ecoserve::sim
