#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "kv/block_allocator.h"

namespace ecoserve::engine {

StatusOr<GenerateResult> Generator::generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                             const std::function<bool(int32_t)>& on_token) {
  if (prompt.empty()) return invalid_argument_error("generate: the prompt has no tokens");
  const auto& sp = options.sampling;
  const int64_t total = static_cast<int64_t>(prompt.size()) + sp.max_tokens;
  if (total > runner_.max_context()) {
    return invalid_argument_error("generate: prompt ({} tokens) + max_tokens ({}) exceeds the context of {} tokens",
                                  prompt.size(), sp.max_tokens, runner_.max_context());
  }
  const int32_t B = runner_.block_size();
  kv::BlockAllocator alloc(runner_.num_kv_blocks());
  ECO_ASSIGN_OR_RETURN(std::vector<BlockId> blocks, alloc.allocate_n(kv::blocks_for_tokens(total, B)));
  const model::Tokenizer& tok = runner_.model().tokenizer();

  GenerateResult result;
  std::vector<int32_t> out;
  StepPlan plan;
  plan.seqs.resize(1);
  SeqStep& s = plan.seqs[0];
  s.id = RequestId(1);
  s.block_table = blocks;
  s.sampling = &sp;
  s.prompt_tokens = prompt;
  s.seed = sp.seed;
  const int32_t chunk = std::max(1, options.prefill_chunk);
  int32_t done = 0;
  auto t0 = std::chrono::steady_clock::now();
  int32_t next = -1;
  while (done < static_cast<int32_t>(prompt.size())) {
    const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(prompt.size()) - done);
    s.num_computed = done;
    s.tokens.assign(prompt.begin() + done, prompt.begin() + done + n);
    done += n;
    s.sample = done == static_cast<int32_t>(prompt.size());
    s.output_tokens = {};
    ECO_ASSIGN_OR_RETURN(StepOutput o, runner_.execute(plan));
    if (s.sample) next = o.seqs.at(0).token;
  }
  auto t1 = std::chrono::steady_clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  result.finish_reason = "length";
  while (true) {
    const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), next) != sp.stop_token_ids.end();
    if ((!sp.ignore_eos && tok.is_eog(next)) || stop_id) {
      result.finish_reason = "stop";
      break;
    }
    out.push_back(next);
    if (on_token && !on_token(next)) {
      result.finish_reason = "callback";
      break;
    }
    if (static_cast<int32_t>(out.size()) >= sp.max_tokens) break;
    s.num_computed = done;
    s.tokens.assign(1, next);
    s.sample = true;
    s.output_tokens = out;
    ++done;
    ECO_ASSIGN_OR_RETURN(StepOutput o, runner_.execute(plan));
    next = o.seqs.at(0).token;
  }
  result.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  for (BlockId b : blocks) alloc.release(b);
  result.tokens = std::move(out);
  return result;
}

}  // namespace ecoserve::engine
