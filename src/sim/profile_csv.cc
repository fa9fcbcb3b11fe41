#include "sim/profile_csv.h"

#include <limits>
#include <utility>

namespace ecoserve::sim {

namespace {

std::vector<std::string> split(std::string_view line) {
  std::vector<std::string> out;
  size_t begin = 0;
  for (;;) {
    const size_t comma = line.find(',', begin);
    if (comma == std::string_view::npos) {
      out.emplace_back(line.substr(begin));
      return out;
    }
    out.emplace_back(line.substr(begin, comma - begin));
    begin = comma + 1;
  }
}

}  // namespace

StatusOr<ProfileCsv> parse_profile_csv(std::string_view text, std::string_view header, std::string_view file_name) {
  const std::string file(file_name);
  ProfileCsv csv;
  csv.file = file;
  int32_t n = 0;
  // Lines as std::getline reads them: a last line without "\n" counts, the empty
  // string after a final "\n" does not.
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (n == std::numeric_limits<int32_t>::max()) {
      return invalid_argument_error("{}: more than {} lines", file, n);
    }
    ++n;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (n == 1) {
      if (line != header) {
        return invalid_argument_error("{} line 1: header is '{}', expected '{}'", file, line, header);
      }
      csv.columns = split(line);
      continue;
    }
    if (line.empty()) continue;
    ProfileCsvRow row{.line = n, .fields = split(line)};
    if (row.fields.size() != csv.columns.size()) {
      return invalid_argument_error("{} line {}: {} fields, expected {} ({})", file, n, row.fields.size(),
                                    csv.columns.size(), header);
    }
    csv.rows.push_back(std::move(row));
  }
  if (n == 0) return invalid_argument_error("{} line 1: empty file, expected header '{}'", file, header);
  return csv;
}

}  // namespace ecoserve::sim
