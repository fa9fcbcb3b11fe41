#include "sim/planner.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ecoserve::sim {
namespace {

constexpr const char* kAllStrategies[] = {"nodg", "fudg", "padg", "llumnix"};

int32_t ceil_div(double need, double each) {
  if (!(each > 0.0)) return 0;
  return std::max(1, static_cast<int32_t>(std::ceil(need / each - 1e-9)));
}

std::string rate_str(double r) { return fmt::format("{:.2f}", r); }

// A layout that fits, with its capacity bounds.
struct Layout {
  Parallelism par;
  InstanceCapacity cap;
};

// A layout's measured goodput in one role.
struct Measured {
  Parallelism par;
  double goodput = 0.0;
  double per_gpu = 0.0;
};

class Planner {
 public:
  Planner(const PlanRequest& request, const PlanOptions& options) : req_(request), opt_(options) {}

  StatusOr<Plan> run() {
    ECO_RETURN_IF_ERROR(init());
    if (wants("nodg") || wants("padg") || wants("llumnix")) ECO_RETURN_IF_ERROR(search_mixed_layouts());
    if (wants("nodg")) plan_nodg();
    if (wants("fudg")) ECO_RETURN_IF_ERROR(plan_fudg());
    if (wants("padg")) ECO_RETURN_IF_ERROR(plan_padg());
    if (wants("llumnix")) ECO_RETURN_IF_ERROR(plan_llumnix());
    ECO_RETURN_IF_ERROR(check_candidates());
    recommend();
    report(1.0, "done");
    return std::move(plan_);
  }

 private:
  bool wants(std::string_view s) const { return std::find(strategies_.begin(), strategies_.end(), s) != strategies_.end(); }

  Status init() {
    if (req_.workload_template.empty()) return invalid_argument_error("the plan's workload has no requests");
    ECO_RETURN_IF_ERROR(validate_slo(req_.slo));
    if (!(req_.slo.ttft_s > 0.0) || !(req_.slo.tpot_s > 0.0)) {
      return invalid_argument_error("the planner needs both a TTFT and a TPOT limit (got {} s and {} s)",
                                    req_.slo.ttft_s, req_.slo.tpot_s);
    }
    if (!(req_.target_rate >= 0.0) || !std::isfinite(req_.target_rate)) {
      return invalid_argument_error("target rate must be >= 0, got {}", req_.target_rate);
    }
    ECO_RETURN_IF_ERROR(validate_probe_options(opt_.probe));
    if (!(opt_.prune_slack >= 1.0)) return invalid_argument_error("prune_slack must be >= 1, got {}", opt_.prune_slack);
    for (int32_t n : opt_.padg_macro_sizes) {
      if (n < 1) return invalid_argument_error("padg macro sizes must be >= 1, got {}", n);
    }
    strategies_ = req_.strategies;
    if (strategies_.empty()) strategies_.assign(std::begin(kAllStrategies), std::end(kAllStrategies));
    for (const std::string& s : strategies_) {
      if (std::find(std::begin(kAllStrategies), std::end(kAllStrategies), s) == std::end(kAllStrategies)) {
        return invalid_argument_error("unknown strategy '{}' (nodg, fudg, padg, llumnix)", s);
      }
    }
    const TopologyOptions& topo = req_.base.cluster.topology;
    per_node_ = topo.gpus_per_node;
    if (per_node_ < 1) return invalid_argument_error("gpus_per_node must be >= 1, got {}", per_node_);
    if (req_.max_gpus < 0) return invalid_argument_error("max_gpus must be >= 0, got {}", req_.max_gpus);
    const int32_t cluster_gpus = topo.num_nodes > 0 ? topo.num_nodes * per_node_ : 0;
    if (req_.max_gpus == 0 && cluster_gpus == 0) {
      return invalid_argument_error("give a GPU budget (max_gpus) or the number of nodes");
    }
    budget_ = req_.max_gpus > 0 ? req_.max_gpus : cluster_gpus;
    if (cluster_gpus > 0 && budget_ > cluster_gpus) {
      return invalid_argument_error("a budget of {} GPUs does not fit {} nodes of {} GPUs", budget_, topo.num_nodes,
                                    per_node_);
    }
    nodes_ = topo.num_nodes > 0 ? topo.num_nodes : (budget_ + per_node_ - 1) / per_node_;
    shape_ = workload_shape(req_.workload_template);
    for (Parallelism par : candidate_layouts(req_.base, budget_)) {
      auto cap = instance_capacity(req_.base, par, shape_);
      if (!cap.ok()) {
        skipped_.push_back(layout_name(par));
        PlanEvaluation e;
        e.strategy = "all";
        e.unit = layout_name(par);
        e.gpus = par.gpus();
        e.note = "does not fit: " + cap.status().message();
        plan_.evaluations.push_back(std::move(e));
        continue;
      }
      layouts_.push_back(Layout{par, *cap});
    }
    // The planned work, for progress: one unit per layout search, segment, macro size, candidate check.
    const double n = static_cast<double>(layouts_.size());
    total_units_ = 0;
    if (wants("nodg") || wants("padg") || wants("llumnix")) total_units_ += n;
    if (wants("fudg")) total_units_ += 2 * n + opt_.paired_segments;
    if (wants("padg")) total_units_ += static_cast<double>(opt_.padg_layouts * opt_.padg_macro_sizes.size());
    if (wants("llumnix")) total_units_ += 2;
    if (opt_.verify) total_units_ += static_cast<double>(strategies_.size()) + 1;
    total_units_ = std::max(total_units_, 1.0);
    if (layouts_.empty()) {
      return invalid_argument_error("no layout of {} fits {} GPUs of {} ({})", req_.base.model, budget_, req_.base.gpu,
                                    plan_.evaluations.empty() ? "none to try" : plan_.evaluations.back().note);
    }
    return ok_status();
  }

  // --- progress ---
  void report(double fraction, const std::string& what) {
    if (opt_.progress) opt_.progress(PlanProgress{std::clamp(fraction, 0.0, 1.0), what});
  }
  std::function<void()> unit_progress(const std::string& what) {
    report(done_units_ / total_units_, what);
    probes_in_unit_ = 0;
    return [this, what] {
      ++probes_in_unit_;
      const double within = std::min(0.95, probes_in_unit_ / (opt_.probe.search_steps + 3.0));
      report((done_units_ + within) / total_units_, what);
    };
  }
  void unit_done() { done_units_ += 1; }

  // --- evaluations ---
  // `slo`: the limits the unit was measured under (nullptr: the request's).
  void record(const std::string& strategy, const std::string& unit, int32_t gpus, const GoodputSearch* s,
              std::string note, const SloSpec* slo = nullptr) {
    PlanEvaluation e;
    e.strategy = strategy;
    e.unit = unit;
    e.gpus = gpus;
    if (s) {
      e.goodput = s->goodput;
      e.goodput_per_gpu = gpus > 0 ? s->goodput / gpus : 0.0;
      e.probes = static_cast<int32_t>(s->probes.size());
      if (note.empty()) {
        note = s->goodput > 0 ? fmt::format("passes at {} req/s", rate_str(s->goodput))
                              : fmt::format("misses the SLO even at {} req/s", rate_str(s->probes.front().rate));
        if (s->first_failing_rate > 0) note += fmt::format(", fails at {}", rate_str(s->first_failing_rate));
      }
      // A probe cut to max_requests spans fewer request lifetimes than asked: its pass may be optimistic.
      const SloSpec& limits = slo ? *slo : req_.slo;
      const double lifetime = std::max(0.0, limits.ttft_s) + shape_.mean_output * std::max(0.0, limits.tpot_s);
      const double wanted = s->goodput * opt_.probe.min_lifetimes * lifetime;
      if (s->goodput > 0 && wanted > opt_.probe.max_requests) {
        note += fmt::format(" (probes capped at {} requests, {:.0f} wanted: may be optimistic)",
                            opt_.probe.max_requests, wanted);
      }
    }
    e.note = std::move(note);
    plan_.evaluations.push_back(std::move(e));
  }

  // The layouts in simulation order for a role whose bound is `bound`; simulates each
  // with `measure` unless pruned; returns the measured ones, best per GPU first.
  template <typename Bound, typename Measure>
  StatusOr<std::vector<Measured>> search_layouts(const std::string& strategy, const std::string& role, Bound bound,
                                                 Measure measure) {
    std::vector<const Layout*> order;
    for (const Layout& l : layouts_) order.push_back(&l);
    std::stable_sort(order.begin(), order.end(), [&](const Layout* a, const Layout* b) {
      return bound(a->cap) / a->par.gpus() > bound(b->cap) / b->par.gpus();
    });
    std::vector<Measured> out;
    double best = 0.0;
    for (const Layout* l : order) {
      const std::string unit = role + " " + layout_name(l->par);
      const double bound_per_gpu = bound(l->cap) / l->par.gpus();
      if (best > 0 && bound_per_gpu * opt_.prune_slack < best) {
        record(strategy, unit, l->par.gpus(), nullptr,
               fmt::format("not simulated: its capacity bound {} req/s per GPU cannot beat {}", rate_str(bound_per_gpu),
                           rate_str(best)));
        unit_done();
        continue;
      }
      auto tick = unit_progress(strategy + " " + unit);
      ECO_ASSIGN_OR_RETURN(GoodputSearch s, measure(l->par, tick));
      unit_done();
      SloSpec limits = req_.slo;
      if (role == "prefill") limits.tpot_s = 0;
      if (role == "decode") limits.ttft_s = 0;
      record(strategy, unit, l->par.gpus(), &s, "", &limits);
      Measured m{l->par, s.goodput, s.goodput / l->par.gpus()};
      best = std::max(best, m.per_gpu);
      out.push_back(m);
    }
    std::stable_sort(out.begin(), out.end(), [](const Measured& a, const Measured& b) {
      if (a.per_gpu != b.per_gpu) return a.per_gpu > b.per_gpu;
      return a.par.gpus() < b.par.gpus();
    });
    return out;
  }

  // The measured layout to replicate: with a target, the one reaching it on the fewest
  // GPUs (ceil(target / goodput) x its GPUs; ties: more goodput per GPU); without,
  // the most goodput per GPU. nullptr when none has goodput.
  const Measured* pick(const std::vector<Measured>& measured) const {
    const Measured* best = nullptr;
    int64_t best_gpus = 0;
    for (const Measured& m : measured) {  // sorted by goodput per GPU
      if (m.goodput <= 0) continue;
      if (!(req_.target_rate > 0)) return &m;
      const int64_t g = int64_t{ceil_div(req_.target_rate, m.goodput)} * m.par.gpus();
      if (!best || g < best_gpus) best = &m, best_gpus = g;
    }
    return best;
  }

  std::string skipped_note() const {
    if (skipped_.empty()) return "";
    return fmt::format("; {} layout(s) do not fit: {}", skipped_.size(), fmt::join(skipped_, ", "));
  }

  DeploymentSpec final_spec(const std::string& strategy) const {
    DeploymentSpec s = req_.base;
    s.cluster.strategy = strategy;
    s.cluster.topology.num_nodes = nodes_;
    s.cluster.keep_token_times = false;
    s.record_steps = false;
    s.placement = "packed";
    s.mixed = RoleSpec{};
    s.prefill = RoleSpec{};
    s.decode = RoleSpec{};
    return s;
  }

  void add_candidate(PlanCandidate c) {
    c.gpus = gpus_needed(c.spec);
    c.goodput_per_gpu = c.gpus > 0 ? c.goodput / c.gpus : 0.0;
    plan_.candidates.push_back(std::move(c));
  }

  // --- nodg (and the mixed layouts padg and llumnix start from) ---
  Status search_mixed_layouts() {
    ECO_ASSIGN_OR_RETURN(
        mixed_, search_layouts(
                    "nodg", "mixed", [](const InstanceCapacity& c) { return c.mixed_rps; },
                    [&](Parallelism par, const std::function<void()>& tick) {
                      return measure_mixed(req_.base, "nodg", par, 1, req_.workload_template, req_.slo, opt_.probe,
                                           tick);
                    }));
    return ok_status();
  }

  void plan_nodg() {
    PlanCandidate c;
    c.strategy = "nodg";
    c.spec = final_spec("nodg");
    const Measured* best = pick(mixed_);
    if (!best) {
      c.spec.mixed = RoleSpec{1, layouts_.front().par};
      c.description = "nodg " + layout_name(layouts_.front().par) + " x1";
      c.note = "no layout meets the SLO even at low load" + skipped_note();
      return add_candidate(std::move(c));
    }
    const int32_t n = req_.target_rate > 0 ? ceil_div(req_.target_rate, best->goodput) : 1;
    c.spec.mixed = RoleSpec{n, best->par};
    c.goodput = n * best->goodput;
    c.description = fmt::format("nodg {} x{}", layout_name(best->par), n);
    c.note = fmt::format("{} req/s per {} instance ({} policy), x{}", rate_str(best->goodput), layout_name(best->par),
                         req_.base.core.policy, n) +
             skipped_note();
    add_candidate(std::move(c));
  }

  // --- fudg ---
  Parallelism helper_layout() const {
    // The fewest GPUs (then the lowest tp) that fit: layouts_ keeps candidate_layouts' order.
    const Layout* best = &layouts_.front();
    for (const Layout& l : layouts_) {
      if (l.par.gpus() < best->par.gpus()) best = &l;
    }
    return best->par;
  }

  Status plan_fudg() {
    const Parallelism helper = helper_layout();
    ECO_ASSIGN_OR_RETURN(
        prefill_, search_layouts(
                      "fudg", "prefill", [](const InstanceCapacity& c) { return c.prefill_rps; },
                      [&](Parallelism par, const std::function<void()>& tick) {
                        return measure_prefill(req_.base, par, helper, req_.workload_template, req_.slo, opt_.probe,
                                               tick);
                      }));
    ECO_ASSIGN_OR_RETURN(
        decode_, search_layouts(
                     "fudg", "decode", [](const InstanceCapacity& c) { return c.decode_rps; },
                     [&](Parallelism par, const std::function<void()>& tick) {
                       return measure_decode(req_.base, par, helper, req_.workload_template, req_.slo, opt_.probe,
                                             tick);
                     }));
    const bool have = !prefill_.empty() && !decode_.empty() && prefill_.front().goodput > 0 &&
                      decode_.front().goodput > 0;
    if (!have) {
      PlanCandidate c;
      c.strategy = "fudg";
      c.spec = final_spec("fudg");
      c.spec.prefill = RoleSpec{1, helper};
      c.spec.decode = RoleSpec{1, helper};
      c.description = "fudg (none)";
      c.note = fmt::format("no {} layout meets its limit even at low load",
                           prefill_.empty() || prefill_.front().goodput <= 0 ? "prefill" : "decode") +
               skipped_note();
      add_candidate(std::move(c));
      for (int32_t i = 0; i < opt_.paired_segments; ++i) unit_done();
      return ok_status();
    }
    plan_fudg_packed();
    return plan_fudg_paired();
  }

  void plan_fudg_packed() {
    // With a target, each role on its fewest GPUs (pick); without, every pair of
    // measured layouts and counts n_p, n_d <= 8 within the budget, for the most
    // min(n_p g_p, n_d g_d) per GPU (ties: fewer GPUs).
    const Measured* p = pick(prefill_);
    const Measured* d = pick(decode_);
    int32_t np = 1, nd = 1;
    if (req_.target_rate > 0) {
      np = ceil_div(req_.target_rate, p->goodput);
      nd = ceil_div(req_.target_rate, d->goodput);
    } else {
      double best = -1;
      int32_t best_gpus = 0;
      for (const Measured& mp : prefill_) {
        for (const Measured& md : decode_) {
          if (mp.goodput <= 0 || md.goodput <= 0) continue;
          for (int32_t a = 1; a <= 8; ++a) {
            for (int32_t b = 1; b <= 8; ++b) {
              const int32_t g = a * mp.par.gpus() + b * md.par.gpus();
              if (g > budget_) continue;
              const double per_gpu = std::min(a * mp.goodput, b * md.goodput) / g;
              if (per_gpu > best * (1 + 1e-12) || (per_gpu >= best * (1 - 1e-12) && g < best_gpus)) {
                best = per_gpu, best_gpus = g, p = &mp, d = &md, np = a, nd = b;
              }
            }
          }
        }
      }
    }
    PlanCandidate c;
    c.strategy = "fudg";
    c.spec = final_spec("fudg");
    c.spec.prefill = RoleSpec{np, p->par};
    c.spec.decode = RoleSpec{nd, d->par};
    c.spec.placement = "packed";
    c.goodput = std::min(np * p->goodput, nd * d->goodput);
    c.description = fmt::format("fudg P: {} x{}, D: {} x{}, packed", layout_name(p->par), np, layout_name(d->par), nd);
    c.note = fmt::format("Algorithm 1: {} req/s per prefill, {} per decode instance", rate_str(p->goodput),
                         rate_str(d->goodput)) +
             skipped_note();
    add_candidate(std::move(c));
  }

  Status plan_fudg_paired() {
    struct Segment {
      Measured p, d;
      int32_t np = 0, nd = 0;
      double estimate = 0.0;
      int32_t gpus = 0;
    };
    std::vector<Segment> segments;
    for (const Measured& p : prefill_) {
      for (const Measured& d : decode_) {
        if (p.par.pp != d.par.pp || p.goodput <= 0 || d.goodput <= 0) continue;
        for (int32_t np = 1; np <= 8; ++np) {
          for (int32_t nd = 1; nd <= 8; ++nd) {
            const int32_t g = np * p.par.gpus() + nd * d.par.gpus();
            if (g > per_node_ || g > budget_) continue;
            segments.push_back(Segment{p, d, np, nd, std::min(np * p.goodput, nd * d.goodput), g});
          }
        }
      }
    }
    // Best first (as pick() ranks units): with a target, the fewest GPUs to reach it
    // by replicating the segment; then (and without a target) the most goodput per GPU.
    const double target = req_.target_rate;
    auto gpus_for_target = [target](double goodput, int32_t gpus) -> int64_t {
      return target > 0 ? int64_t{ceil_div(target, goodput)} * gpus : 0;
    };
    auto better = [&](double ga, int32_t a, double gb, int32_t b) {
      const int64_t ta = gpus_for_target(ga, a), tb = gpus_for_target(gb, b);
      if (ta != tb) return ta < tb;
      const double x = ga / a, y = gb / b;
      if (x != y) return x > y;
      return a < b;
    };
    std::stable_sort(segments.begin(), segments.end(), [&](const Segment& a, const Segment& b) {
      return better(a.estimate, a.gpus, b.estimate, b.gpus);
    });
    if (segments.size() > static_cast<size_t>(opt_.paired_segments)) segments.resize(opt_.paired_segments);
    if (segments.empty()) {
      PlanCandidate c;
      c.strategy = "fudg";
      c.spec = final_spec("fudg");
      c.spec.prefill = RoleSpec{1, prefill_.front().par};
      c.spec.decode = RoleSpec{1, decode_.front().par};
      c.spec.placement = "paired";
      c.description = "fudg paired (none)";
      c.note = fmt::format("Algorithm 2: no prefill + decode pair of one pp fits a node of {} GPUs", per_node_);
      add_candidate(std::move(c));
      for (int32_t i = 0; i < opt_.paired_segments; ++i) unit_done();
      return ok_status();
    }
    std::optional<Segment> best;
    double best_goodput = 0.0;
    for (int32_t i = 0; i < opt_.paired_segments; ++i) {
      if (static_cast<size_t>(i) >= segments.size()) {
        unit_done();
        continue;
      }
      const Segment& s = segments[static_cast<size_t>(i)];
      const std::string unit = fmt::format("segment P {} x{} + D {} x{}", layout_name(s.p.par), s.np,
                                           layout_name(s.d.par), s.nd);
      DeploymentSpec spec = mixed_unit(req_.base, "fudg", Parallelism{}, 0);
      spec.mixed = RoleSpec{};
      spec.prefill = RoleSpec{s.np, s.p.par};
      spec.decode = RoleSpec{s.nd, s.d.par};
      spec.placement = "paired";
      auto tick = unit_progress("fudg " + unit);
      ECO_ASSIGN_OR_RETURN(
          GoodputSearch g,
          measure_goodput([&](double) -> StatusOr<DeploymentSpec> { return spec; }, req_.workload_template, req_.slo,
                          s.estimate, probe_requests(opt_.probe, s.np + s.nd), opt_.probe, tick));
      unit_done();
      record("fudg", unit, s.gpus, &g, fmt::format("estimate {} req/s; {}", rate_str(s.estimate),
                                                   g.goodput > 0 ? "passes at " + rate_str(g.goodput) : "misses"));
      if (g.goodput > 0 && (!best || better(g.goodput, s.gpus, best_goodput, best->gpus))) {
        best = s, best_goodput = g.goodput;
      }
    }
    PlanCandidate c;
    c.strategy = "fudg";
    c.spec = final_spec("fudg");
    c.spec.placement = "paired";
    if (!best) {
      c.spec.prefill = RoleSpec{segments[0].np, segments[0].p.par};
      c.spec.decode = RoleSpec{segments[0].nd, segments[0].d.par};
      c.description = "fudg paired (none)";
      c.note = "Algorithm 2: no segment meets the SLO";
      add_candidate(std::move(c));
      return ok_status();
    }
    const int32_t k = req_.target_rate > 0 ? ceil_div(req_.target_rate, best_goodput) : 1;
    c.spec.prefill = RoleSpec{best->np * k, best->p.par};
    c.spec.decode = RoleSpec{best->nd * k, best->d.par};
    c.goodput = k * best_goodput;
    c.description = fmt::format("fudg P: {} x{}, D: {} x{}, paired", layout_name(best->p.par), best->np * k,
                                layout_name(best->d.par), best->nd * k);
    c.note = fmt::format("Algorithm 2: segment of {} GPUs serves {} req/s, x{}", best->gpus, rate_str(best_goodput), k);
    if (k > 1 && nodes_ > 1) {
      c.note += " (replicas are interleaved P/D one to one and dispatch may pick another node's decode instance)";
    }
    add_candidate(std::move(c));
    return ok_status();
  }

  // --- padg ---
  Status plan_padg() {
    std::vector<Parallelism> pars;
    for (const Measured& m : mixed_) {
      if (m.goodput > 0 && pars.size() < static_cast<size_t>(opt_.padg_layouts)) pars.push_back(m.par);
    }
    if (pars.empty() && !mixed_.empty()) pars.push_back(mixed_.front().par);  // none meets the SLO as nodg
    if (pars.empty()) pars.push_back(layouts_.front().par);
    // Macro instances measured, as Measured units of nu x par (keyed by position in `sizes`).
    std::vector<Measured> macros;
    std::vector<int32_t> sizes;
    std::vector<std::string> too_big;
    for (size_t li = 0; li < static_cast<size_t>(opt_.padg_layouts); ++li) {
      for (int32_t nu : opt_.padg_macro_sizes) {
        if (li >= pars.size()) {
          unit_done();
          continue;
        }
        const Parallelism par = pars[li];
        if (nu * par.gpus() > budget_) {
          too_big.push_back(fmt::format("{} x{}", layout_name(par), nu));
          unit_done();
          continue;
        }
        const std::string unit = fmt::format("macro {} x {}", nu, layout_name(par));
        auto tick = unit_progress("padg " + unit);
        ECO_ASSIGN_OR_RETURN(GoodputSearch g, measure_mixed(padg_base(nu), "padg", par, nu, req_.workload_template,
                                                            req_.slo, opt_.probe, tick));
        unit_done();
        record("padg", unit, nu * par.gpus(), &g, "");
        // A macro instance as one unit: its GPUs are nu x par's (pick() reads par.gpus()).
        macros.push_back(Measured{Parallelism{par.tp, par.pp * nu}, g.goodput, g.goodput / (nu * par.gpus())});
        sizes.push_back(nu);
      }
    }
    // pick() over macro units, in goodput-per-GPU order (stable: measurement order on ties).
    std::vector<size_t> order(macros.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return macros[x].per_gpu > macros[y].per_gpu; });
    std::vector<Measured> sorted;
    for (size_t i : order) sorted.push_back(macros[i]);
    const Measured* best = pick(sorted);
    PlanCandidate c;
    c.strategy = "padg";
    c.spec = final_spec("padg");
    if (!best) {
      const Parallelism par = pars.front();
      const int32_t nu = std::max(1, std::min(opt_.padg_macro_sizes.empty() ? 1 : opt_.padg_macro_sizes.front(),
                                              budget_ / par.gpus()));
      c.spec.mixed = RoleSpec{nu, par};
      c.description = fmt::format("padg {} x{}", layout_name(par), nu);
      c.note = macros.empty() ? fmt::format("no macro instance fits {} GPUs", budget_)
                              : "no macro instance meets the SLO even at low load";
      add_candidate(std::move(c));
      return ok_status();
    }
    const int32_t nu = sizes[order[static_cast<size_t>(best - sorted.data())]];
    const Parallelism par{best->par.tp, best->par.pp / nu};
    const int32_t k = req_.target_rate > 0 ? ceil_div(req_.target_rate, best->goodput) : 1;
    c.spec = final_spec("padg");
    c.spec.cluster = padg_base(nu).cluster;
    c.spec.cluster.strategy = "padg";
    c.spec.cluster.topology.num_nodes = nodes_;
    c.spec.cluster.keep_token_times = false;
    c.spec.mixed = RoleSpec{k * nu, par};
    c.goodput = k * best->goodput;
    c.description = fmt::format("padg {} x{}, macro N_u {}", layout_name(par), k * nu, nu);
    c.note = fmt::format("a macro instance of {} serves {} req/s, x{}", nu, rate_str(best->goodput), k);
    if (!too_big.empty()) c.note += fmt::format("; macro instances over the budget: {}", fmt::join(too_big, ", "));
    add_candidate(std::move(c));
    return ok_status();
  }

  // The base with padg's macro size N_u (N_l = N_u / 2) and the prefill chunk for its predictions.
  DeploymentSpec padg_base(int32_t nu) const {
    DeploymentSpec base = req_.base;
    base.cluster.mitosis.macro_max = nu;
    base.cluster.mitosis.macro_min = std::max(1, nu / 2);
    if (base.core.chunk_size > 0) base.cluster.padg.chunk_size = base.core.chunk_size;
    return base;
  }

  // --- llumnix ---
  Status plan_llumnix() {
    PlanCandidate c;
    c.strategy = "llumnix";
    c.spec = final_spec("llumnix");
    const Measured* m = pick(mixed_);
    if (!m) {
      c.spec.mixed = RoleSpec{1, layouts_.front().par};
      c.description = "llumnix (none)";
      c.note = "no mixed layout meets the SLO even at low load";
      unit_done(), unit_done();
      add_candidate(std::move(c));
      return ok_status();
    }
    const int32_t most = std::max(1, budget_ / m->par.gpus());
    int32_t n = req_.target_rate > 0 ? ceil_div(req_.target_rate, m->goodput) : 2;
    n = std::min(n, most);
    GoodputSearch g;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const std::string unit = fmt::format("replicas {} x {}", n, layout_name(m->par));
      auto tick = unit_progress("llumnix " + unit);
      ECO_ASSIGN_OR_RETURN(g, measure_mixed(req_.base, "llumnix", m->par, n, req_.workload_template, req_.slo,
                                            opt_.probe, tick));
      unit_done();
      record("llumnix", unit, n * m->par.gpus(), &g, "");
      if (attempt == 1) break;
      if (!(req_.target_rate > 0 && g.goodput < req_.target_rate && n + 1 <= most)) {
        unit_done();
        break;
      }
      ++n;
    }
    c.spec.mixed = RoleSpec{n, m->par};
    c.goodput = g.goodput;
    c.description = fmt::format("llumnix {} x{}", layout_name(m->par), n);
    c.note = fmt::format("simulated with migration at {} replicas", n);
    add_candidate(std::move(c));
    return ok_status();
  }

  // --- feasibility, verification, recommendation ---
  Status check_candidates() {
    for (PlanCandidate& c : plan_.candidates) {
      std::vector<std::string> why;
      if (c.goodput <= 0) why.push_back("no goodput");
      if (c.gpus > budget_) why.push_back(fmt::format("needs {} GPUs, over the budget of {}", c.gpus, budget_));
      if (req_.target_rate > 0 && c.goodput > 0 && c.goodput + 1e-9 < req_.target_rate) {
        why.push_back(fmt::format("reaches {} of the {} req/s target", rate_str(c.goodput), rate_str(req_.target_rate)));
      }
      if (why.empty()) {
        auto built = build_cluster(c.spec);
        if (!built.ok()) why.push_back("does not fit the topology: " + built.status().message());
      }
      if (why.empty() && opt_.verify) {
        const int32_t instances = c.spec.cluster.strategy == "fudg"
                                      ? c.spec.prefill.instances + c.spec.decode.instances
                                      : c.spec.mixed.instances;
        const int32_t n = probe_requests(opt_.probe, instances);
        const bool fixed_rate = req_.target_rate > 0;
        double rate = fixed_rate ? req_.target_rate : c.goodput;
        report(done_units_ / total_units_, "verify " + c.description);
        // Without a target, a replicated estimate that misses is lowered (at most 3 x 10%).
        for (int attempt = 0;; ++attempt) {
          ECO_ASSIGN_OR_RETURN(double att, attainment_at(c.spec, req_.workload_template, req_.slo, rate, n, opt_.probe));
          c.verified_rate = rate;
          c.verified_attainment = att;
          if (att >= req_.slo.attainment || fixed_rate || attempt == 3) break;
          rate *= 0.9;
        }
        unit_done();
        const std::string at = fmt::format("{:.0f}% within the SLO at {} req/s", 100 * c.verified_attainment,
                                           rate_str(c.verified_rate));
        if (c.verified_attainment < req_.slo.attainment) {
          why.push_back("verification: only " + at);
        } else {
          if (!fixed_rate && c.verified_rate < c.goodput) {
            c.note += fmt::format("; lowered from the estimate of {} req/s", rate_str(c.goodput));
            c.goodput = c.verified_rate;
            c.goodput_per_gpu = c.goodput / c.gpus;
          }
          c.note += "; verified: " + at;
        }
      }
      c.feasible = why.empty();
      if (!why.empty()) c.note += fmt::format("; not feasible: {}", fmt::join(why, "; "));
    }
    return ok_status();
  }

  void recommend() {
    std::vector<PlanCandidate>& cs = plan_.candidates;
    std::stable_sort(cs.begin(), cs.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
      if (a.goodput_per_gpu != b.goodput_per_gpu) return a.goodput_per_gpu > b.goodput_per_gpu;
      return a.gpus < b.gpus;
    });
    const bool target = req_.target_rate > 0;
    plan_.recommended = cs.size();
    for (size_t i = 0; i < cs.size(); ++i) {
      if (!cs[i].feasible) continue;
      if (plan_.recommended == cs.size()) {
        plan_.recommended = i;
        continue;
      }
      // Sorted by goodput per GPU: with a target, fewer GPUs beat it.
      if (target && cs[i].gpus < cs[plan_.recommended].gpus) plan_.recommended = i;
    }
    if (plan_.recommended == cs.size()) {
      plan_.reason = target ? fmt::format("no candidate serves {} req/s within the SLO on {} GPUs",
                                          rate_str(req_.target_rate), budget_)
                            : fmt::format("no candidate meets the SLO on {} GPUs", budget_);
      return;
    }
    const PlanCandidate& r = cs[plan_.recommended];
    const PlanCandidate* next = nullptr;
    for (size_t i = 0; i < cs.size(); ++i) {
      if (i != plan_.recommended && cs[i].feasible) {
        next = &cs[i];
        break;
      }
    }
    if (target) {
      plan_.reason = fmt::format("it serves the {} req/s target within the SLO on {} GPUs, the fewest of the feasible "
                                 "candidates ({} req/s per GPU)",
                                 rate_str(req_.target_rate), r.gpus, rate_str(r.goodput_per_gpu));
      if (next) plan_.reason += fmt::format("; next: {} on {} GPUs", next->description, next->gpus);
    } else {
      plan_.reason = fmt::format("it has the most goodput per GPU of the feasible candidates: {} req/s per GPU",
                                 rate_str(r.goodput_per_gpu));
      if (next) plan_.reason += fmt::format(" (next: {} with {})", next->description, rate_str(next->goodput_per_gpu));
    }
  }

  const PlanRequest& req_;
  const PlanOptions& opt_;
  std::vector<std::string> strategies_;
  int32_t per_node_ = 0, budget_ = 0, nodes_ = 0;
  WorkloadShape shape_;
  std::vector<Layout> layouts_;
  std::vector<std::string> skipped_;
  std::vector<Measured> mixed_, prefill_, decode_;
  double total_units_ = 1, done_units_ = 0;
  int32_t probes_in_unit_ = 0;
  Plan plan_;
};

}  // namespace

std::vector<Parallelism> candidate_layouts(const DeploymentSpec& base, int32_t max_gpus) {
  std::vector<Parallelism> out;
  if (base.cost_model == "given") {
    if (max_gpus >= 1) out.push_back(Parallelism{1, 1});
    return out;
  }
  auto model = model_preset(base.model);
  const int32_t per_node = base.cluster.topology.gpus_per_node;
  for (int32_t tp = 1; tp <= per_node && tp <= max_gpus; tp *= 2) {
    for (int32_t pp = 1; tp * pp <= max_gpus; pp *= 2) {
      const Parallelism par{tp, pp};
      if (model.ok() && !validate_parallelism(*model, par).ok()) continue;
      out.push_back(par);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](Parallelism a, Parallelism b) {
    if (a.gpus() != b.gpus()) return a.gpus() < b.gpus();
    return a.tp < b.tp;
  });
  return out;
}

StatusOr<Plan> plan(const PlanRequest& request, const PlanOptions& options) {
  Planner p(request, options);
  return p.run();
}

}  // namespace ecoserve::sim
