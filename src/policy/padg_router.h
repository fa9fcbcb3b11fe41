// PadgRouter: EcoServe's routing for partial disaggregation (padg) - the overall
// scheduler over macro instances and, inside one, Algorithms 1 and 2 of the
// paper (adaptive inter-instance scheduling with constraint checks).
//
// Layout: the instances are grouped into macro instances (set_layout; mitosis
// scaling changes it by moving instance handles). A new request goes to the
// least-loaded macro instance (the lowest mean load_tokens per healthy member;
// ties to the earlier macro instance), then inside it:
//
//  Algorithm 1 (stay or advance): the macro instance remembers the member that
//  took its previous request ("last"). If CheckConstraints holds there, the
//  request goes there too (prompts gather on one instance, whose prefill phase
//  takes them together while the others decode); otherwise the next members in
//  ring order are tried, and the first that passes takes it and becomes "last".
//  So prefill phases roll around the ring (rolling activation).
//
//  Algorithm 2 (CheckConstraints(i, r)), with P = pending_prefill_seconds of i
//  (prefills routed there that have no first token yet) + the predicted prefill
//  time of r (CostModel::prefill_seconds, chunked):
//    TTFT: c_i x P <= SLO_TTFT;
//    TPOT: the mean saved TPOT of i's decodes >= c_i x P (holds when none has a TPOT SLO);
//    KV:   blocks_for(prompt + 1) <= free blocks - blocks_for(queued prompt tokens);
//    and (options.check_decode_step) the decode step of i's decoding requests
//    plus r predicted within SLO_TPOT.
//
//  c_i calibrates the predictions (options.calibrate, not in the paper): the
//  ratio of observed to predicted times to first token on instance i
//  (observe_ttft; sums decayed by calibration_weight, so long prefills weigh
//  more than short ones), within [min_calibration, max_calibration]; 1 until
//  observed. A profile measured on an idle machine under-predicts a loaded one,
//  and Algorithm 1 fills the TTFT budget to the SLO, so without it small errors
//  become misses.
//
//  When no member passes: with reject_unmeetable the request is rejected with a
//  reason when its predicted TTFT (P on the best member) exceeds SLO_TTFT;
//  otherwise it goes to the member with the least P that has the KV room (or
//  the least P at all). Unhealthy or non-mixed instances are never chosen.
//
// Pure: decisions depend only on the view, the request and the router's small
// state (layout, "last" per macro instance, the calibration sums); no clock (the request carries
// `now`), no I/O. One thread at a time. Borrows the cost model (shared).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/cluster_view.h"
#include "policy/cost_model.h"
#include "policy/router_policy.h"

namespace ecoserve::policy {

struct PadgRouterOptions {
  Duration default_slo_ttft = std::chrono::milliseconds(5000);  // for requests without their own
  Duration default_slo_tpot = std::chrono::milliseconds(200);
  int32_t chunk_size = 512;        // the instances' prefill chunk (for predictions)
  bool reject_unmeetable = false;  // reject when no instance can meet the TTFT SLO
  // A fourth check, not in the paper, as a preference: Algorithm 1 first looks for
  // a member passing all four, then for one passing the paper's three. The decode
  // batch the request joins should still step within SLO_TPOT (the cost model's decode step for the instance's decoding
  // requests plus this one, at their context; queued prompts are left out, as
  // decodes finish while they prefill). The paper's GPUs decode a batch about as fast
  // as one sequence, so staying on one instance costs the decodes nothing; on a CPU
  // a decode step grows with the batch and Algorithm 1 alone piles decodes up.
  bool check_decode_step = true;
  // Scale each instance's predictions by its observed / predicted TTFT (above).
  bool calibrate = true;
  double calibration_weight = 0.1;  // of a new observation in the decayed sums
  double min_calibration = 0.5;
  double max_calibration = 4.0;
};

// Why a member failed CheckConstraints (kNone: it passed).
enum class PadgCheck : uint8_t { kNone, kTtft, kTpot, kKv, kDecodeStep, kUnavailable };
const char* padg_check_name(PadgCheck c);

struct PadgDecision {
  std::optional<InstanceId> instance;  // nullopt: rejected (reason) or no instance at all
  double predicted_prefill_seconds = 0.0;  // of this request alone
  double predicted_ttft_seconds = 0.0;     // pending prefills on the chosen instance + this one, calibrated
  double uncalibrated_ttft_seconds = 0.0;  // the same from the cost model alone (for observe_ttft)
  bool constraints_met = false;            // chosen by Algorithm 1/2 (not the fallback)
  int32_t macro_index = -1;
  std::string reason;  // when rejected: why (for HTTP 429)
};

class PadgRouter final : public RouterPolicy {
 public:
  PadgRouter(const PadgRouterOptions& options, std::shared_ptr<const CostModel> cost_model);

  // Macro instances as lists of instance ids, in ring order. Instances missing
  // from the layout are not routed to; an empty layout means one macro instance
  // of every instance in view order. Keeps "last" of macro instances whose
  // member at that position is unchanged.
  void set_layout(std::vector<std::vector<InstanceId>> layout);
  const std::vector<std::vector<InstanceId>>& layout() const { return layout_; }

  PadgDecision decide(const ClusterView& view, const RouteRequest& req);
  // RouterPolicy: decide(...).instance.
  std::optional<InstanceId> route(const ClusterView& view, const RouteRequest& req) override;
  std::string_view name() const override { return "padg"; }
  void remove_instance(InstanceId id) override;

  // Algorithm 2 on one instance (pure; exposed for tests and the admin API).
  // `decode_step` false leaves out the fourth check (the paper's three only).
  PadgCheck check_constraints(const InstanceLoad& load, const RouteRequest& req, double prefill_seconds,
                              bool decode_step = true) const;
  double predict_prefill_seconds(const RouteRequest& req) const;

  // A request routed to `id` with an uncalibrated predicted TTFT of `predicted`
  // seconds got its first token `observed` seconds after it was routed.
  void observe_ttft(InstanceId id, double predicted, double observed);
  // c_i: 1 without observations (or with calibrate off).
  double calibration(InstanceId id) const;

 private:
  struct Calibration {
    double observed = 0.0;   // decayed sums
    double predicted = 0.0;
  };

  PadgRouterOptions options_;
  std::shared_ptr<const CostModel> cost_model_;
  std::vector<std::vector<InstanceId>> layout_;
  std::vector<size_t> last_;  // per macro instance: position of "last" in its members
  std::unordered_map<int32_t, Calibration> calibration_;  // by instance id
  // decide()'s scratch: view position by instance id (a flat table for the
  // router's dense ids, a map for sparse ones).
  void index_view(const ClusterView& view);
  const InstanceLoad* find(const ClusterView& view, InstanceId id) const;
  std::vector<int64_t> position_;
  std::unordered_map<int32_t, size_t> sparse_position_;
  bool sparse_ = false;
};

}  // namespace ecoserve::policy
