// Loading the tokenizers the tokenizer fuzz targets run on: GGUF files of
// ../shared/data (read in place; $ECOSERVE_SHARED_DATA or the path compiled in,
// see base/test_data.h). A missing file is skipped with one message, so the
// targets still run (and do nothing) where the data is absent.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "base/test_data.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace ecoserve::fuzz {

struct LoadedTokenizer {
  std::string name;  // the path under shared data
  std::unique_ptr<model::Tokenizer> tokenizer;
};

inline std::vector<LoadedTokenizer> load_shared_tokenizers(const std::vector<std::string>& relative_paths) {
  std::vector<LoadedTokenizer> out;
  for (const std::string& rel : relative_paths) {
    const auto path = shared_data_path(rel);
    if (!path) {
      std::fprintf(stderr, "fuzz: %s\n", missing_data_message(rel).c_str());
      continue;
    }
    auto file = model::GgufFile::open(*path);
    if (!file.ok()) {
      std::fprintf(stderr, "fuzz: cannot open %s: %s\n", path->c_str(), file.status().to_string().c_str());
      std::abort();  // present but unreadable: a real failure
    }
    auto tok = model::Tokenizer::from_gguf(**file);
    if (!tok.ok()) {
      std::fprintf(stderr, "fuzz: no tokenizer in %s: %s\n", path->c_str(), tok.status().to_string().c_str());
      std::abort();
    }
    out.push_back(LoadedTokenizer{rel, std::move(tok).value()});
  }
  if (out.empty()) std::fprintf(stderr, "fuzz: no tokenizer loaded; every input is skipped\n");
  return out;
}

}  // namespace ecoserve::fuzz
