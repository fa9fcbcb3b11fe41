// FakeExecutor: a deterministic Executor for tests of InstanceCore and of the
// layers above it. It stores, per KV slot, the token id whose KV would be there
// and checks on every step that each sequence's computed positions hold exactly
// its prompt + output tokens (so a wrong block table, copy or swap fails the
// test), then "samples" next_token(id, output index). Failure injection: the
// next execute() can return an error. Test-only header.
#pragma once

#include <algorithm>
#include <cstring>
#include <span>
#include <functional>
#include <string>
#include <vector>

#include "base/executor.h"

namespace ecoserve::instance::testing {

class FakeExecutor final : public Executor {
 public:
  using TokenFn = std::function<int32_t(RequestId, int32_t /*output index*/)>;

  FakeExecutor(int32_t block_size, int32_t num_blocks, int32_t max_context, int32_t num_host_blocks = 0)
      : block_size_(block_size), num_blocks_(num_blocks), num_host_blocks_(num_host_blocks), max_context_(max_context),
        device_(static_cast<size_t>(num_blocks) * block_size, -1),
        host_(static_cast<size_t>(std::max(1, num_host_blocks)) * block_size, -1) {}

  // 1000 + a hash of (request, index): never an end-of-generation id below 1000.
  static int32_t default_token(RequestId id, int32_t k) {
    return 1000 + static_cast<int32_t>((id.value * 31 + static_cast<uint64_t>(k)) % 97);
  }

  StatusOr<StepOutput> execute(const StepPlan& plan) override {
    plans.push_back(summarize(plan));
    if (!fail_next.empty()) {
      std::string msg = std::move(fail_next);
      fail_next.clear();
      return internal_error("{}", msg);
    }
    for (const BlockCopy& c : plan.swap_out) copy(device_, c.src, host_, c.dst);
    for (const BlockCopy& c : plan.swap_in) copy(host_, c.src, device_, c.dst);
    for (const BlockCopy& c : plan.copies) copy(device_, c.src, device_, c.dst);
    StepOutput out;
    for (const SeqStep& s : plan.seqs) {
      std::vector<int32_t> all(s.prompt_tokens.begin(), s.prompt_tokens.end());
      all.insert(all.end(), s.output_tokens.begin(), s.output_tokens.end());
      const int32_t end = s.num_computed + static_cast<int32_t>(s.tokens.size());
      if (end > static_cast<int32_t>(all.size()) ||
          static_cast<int64_t>(s.block_table.size()) * block_size_ < end) {
        return invalid_argument_error("request {}: bad plan (end {}, {} tokens, {} blocks)", s.id.value, end,
                                      all.size(), s.block_table.size());
      }
      for (int32_t pos = 0; pos < s.num_computed; ++pos) {
        if (slot(s.block_table, pos) != all[static_cast<size_t>(pos)]) {
          ++kv_mismatches;
        }
      }
      for (size_t i = 0; i < s.tokens.size(); ++i) slot(s.block_table, s.num_computed + static_cast<int32_t>(i)) = s.tokens[i];
      if (s.sample) {
        SeqOutput o;
        o.id = s.id;
        o.token = next_token(s.id, static_cast<int32_t>(s.output_tokens.size()));
        o.logprob = -0.5f;
        seeds.push_back(s.seed);
        out.seqs.push_back(std::move(o));
      }
    }
    return out;
  }

  // The blob is [begin, end, slot contents...] as int32: the importing side's KV
  // checks then prove the transfer moved the right positions into the right blocks.
  StatusOr<std::vector<uint8_t>> export_kv(std::span<const BlockId> blocks, int32_t begin,
                                           int32_t end) const override {
    if (begin < 0 || end < begin || static_cast<int64_t>(blocks.size()) * block_size_ < end) {
      return invalid_argument_error("fake export of [{}, {}) from {} blocks", begin, end, blocks.size());
    }
    std::vector<int32_t> v = {begin, end};
    for (int32_t pos = begin; pos < end; ++pos) v.push_back(slot_at(blocks, pos));
    std::vector<uint8_t> out(v.size() * sizeof(int32_t));
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  StatusOr<int32_t> import_kv(std::span<const uint8_t> blob, std::span<const BlockId> blocks) override {
    if (!fail_import.empty()) return failed_precondition_error("{}", fail_import);
    if (blob.size() < 2 * sizeof(int32_t) || blob.size() % sizeof(int32_t) != 0) {
      return invalid_argument_error("fake import: corrupt blob");
    }
    std::vector<int32_t> v(blob.size() / sizeof(int32_t));
    std::memcpy(v.data(), blob.data(), blob.size());
    const int32_t begin = v[0], end = v[1];
    if (static_cast<int32_t>(v.size()) != 2 + end - begin || static_cast<int64_t>(blocks.size()) * block_size_ < end) {
      return invalid_argument_error("fake import: [{}, {}) does not fit", begin, end);
    }
    for (int32_t pos = begin; pos < end; ++pos) slot_at(blocks, pos) = v[static_cast<size_t>(2 + pos - begin)];
    return end - begin;
  }

  int32_t block_size() const override { return block_size_; }
  int32_t num_kv_blocks() const override { return num_blocks_; }
  int32_t num_host_blocks() const override { return num_host_blocks_; }
  int32_t max_context() const override { return max_context_; }

  // One line per executed plan: "id:num_computed+num_tokens[s]" per sequence.
  static std::string summarize(const StepPlan& plan) {
    std::string out;
    for (const SeqStep& s : plan.seqs) {
      if (!out.empty()) out += ' ';
      out += std::to_string(s.id.value) + ":" + std::to_string(s.num_computed) + "+" +
             std::to_string(s.tokens.size()) + (s.sample ? "s" : "");
    }
    return out;
  }

  TokenFn next_token = default_token;
  std::string fail_next;            // non-empty: the next execute() fails with this message
  std::string fail_import;          // non-empty: import_kv() fails with this message
  std::vector<std::string> plans;   // summarize() of every executed plan
  std::vector<uint64_t> seeds;      // SeqStep::seed of every sampled sequence, in order
  int64_t kv_mismatches = 0;        // computed positions whose KV slot held another token

 private:
  int32_t& slot(const std::vector<BlockId>& table, int32_t pos) { return slot_at(table, pos); }
  int32_t& slot_at(std::span<const BlockId> table, int32_t pos) {
    return device_[static_cast<size_t>(table[static_cast<size_t>(pos / block_size_)].value) * block_size_ +
                   pos % block_size_];
  }
  int32_t slot_at(std::span<const BlockId> table, int32_t pos) const {
    return device_[static_cast<size_t>(table[static_cast<size_t>(pos / block_size_)].value) * block_size_ +
                   pos % block_size_];
  }
  void copy(std::vector<int32_t>& from, BlockId src, std::vector<int32_t>& to, BlockId dst) const {
    for (int32_t i = 0; i < block_size_; ++i) {
      to[static_cast<size_t>(dst.value) * block_size_ + i] = from[static_cast<size_t>(src.value) * block_size_ + i];
    }
  }

  int32_t block_size_, num_blocks_, num_host_blocks_, max_context_;
  std::vector<int32_t> device_, host_;
};

}  // namespace ecoserve::instance::testing
