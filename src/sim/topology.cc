#include "sim/topology.h"

#include <cmath>
#include <memory>

#include <fmt/format.h>

namespace ecoserve::sim {
namespace {

constexpr std::int32_t kMaxGpus = 1 << 24;

}  // namespace

Status Topology::validate(const TopologyOptions& o) {
  if (o.num_nodes < 1) return invalid_argument_error("topology: num_nodes must be >= 1, got {}", o.num_nodes);
  if (o.gpus_per_node < 1) {
    return invalid_argument_error("topology: gpus_per_node must be >= 1, got {}", o.gpus_per_node);
  }
  if (static_cast<std::int64_t>(o.num_nodes) * o.gpus_per_node > kMaxGpus) {
    return invalid_argument_error("topology: {} nodes x {} GPUs is more than {} GPUs", o.num_nodes,
                                  o.gpus_per_node, kMaxGpus);
  }
  if (o.intra != "nvlink" && o.intra != "pcie") {
    return invalid_argument_error("topology: intra must be 'nvlink' or 'pcie', got '{}'", o.intra);
  }
  if (!(o.intra_bytes_per_s >= 0) || !std::isfinite(o.intra_bytes_per_s)) {
    return invalid_argument_error("topology: intra_bytes_per_s must be >= 0 (0 = default) and finite, got {}",
                                  o.intra_bytes_per_s);
  }
  if (o.intra_latency < Duration::zero()) {
    return invalid_argument_error("topology: intra_latency must be >= 0, got {} ns", o.intra_latency.count());
  }
  if (!(o.inter_node_gbps > 0) || !std::isfinite(o.inter_node_gbps)) {
    return invalid_argument_error("topology: inter_node_gbps must be > 0 and finite, got {}", o.inter_node_gbps);
  }
  if (o.inter_latency < Duration::zero()) {
    return invalid_argument_error("topology: inter_latency must be >= 0, got {} ns", o.inter_latency.count());
  }
  return ok_status();
}

Topology::Topology(SimNetwork& network, TopologyOptions options)
    : network_(&network), options_(std::move(options)) {}

StatusOr<Topology> Topology::create(SimNetwork& network, TopologyOptions options) {
  ECO_RETURN_IF_ERROR(validate(options));
  Topology t(network, std::move(options));
  const TopologyOptions& o = t.options_;
  t.intra_bytes_per_s_ = o.intra_bytes_per_s > 0 ? o.intra_bytes_per_s
                         : o.intra == "nvlink"   ? kNvlinkBytesPerS
                                                 : kPcieBytesPerS;
  const double inter = t.inter_bytes_per_s();
  for (std::int32_t n = 0; n < o.num_nodes; ++n) {
    for (std::int32_t g = 0; g < o.gpus_per_node; ++g) {
      ECO_ASSIGN_OR_RETURN(LinkId up, network.add_link({fmt::format("node{}.gpu{}.up", n, g),
                                                         t.intra_bytes_per_s_, o.intra_latency}));
      ECO_ASSIGN_OR_RETURN(LinkId down, network.add_link({fmt::format("node{}.gpu{}.down", n, g),
                                                           t.intra_bytes_per_s_, Duration::zero()}));
      t.up_.push_back(up);
      t.down_.push_back(down);
    }
    ECO_ASSIGN_OR_RETURN(LinkId out, network.add_link({fmt::format("node{}.nic_out", n), inter, o.inter_latency}));
    ECO_ASSIGN_OR_RETURN(LinkId in, network.add_link({fmt::format("node{}.nic_in", n), inter, Duration::zero()}));
    t.nic_out_.push_back(out);
    t.nic_in_.push_back(in);
  }
  return t;
}

GpuId Topology::gpu(std::int32_t node, std::int32_t index_in_node) const {
  ECO_CHECK_MSG(node >= 0 && node < num_nodes() && index_in_node >= 0 && index_in_node < gpus_per_node(),
                "topology: no GPU {} on node {}", index_in_node, node);
  return GpuId(node * gpus_per_node() + index_in_node);
}

std::int32_t Topology::node_of(GpuId g) const {
  ECO_CHECK_MSG(contains(g), "topology: unknown GPU {}", g.value);
  return g.value / gpus_per_node();
}

LinkId Topology::gpu_up(GpuId g) const {
  ECO_CHECK_MSG(contains(g), "topology: unknown GPU {}", g.value);
  return up_[g.value];
}

LinkId Topology::gpu_down(GpuId g) const {
  ECO_CHECK_MSG(contains(g), "topology: unknown GPU {}", g.value);
  return down_[g.value];
}

LinkId Topology::nic_out(std::int32_t node) const {
  ECO_CHECK_MSG(node >= 0 && node < num_nodes(), "topology: unknown node {}", node);
  return nic_out_[node];
}

LinkId Topology::nic_in(std::int32_t node) const {
  ECO_CHECK_MSG(node >= 0 && node < num_nodes(), "topology: unknown node {}", node);
  return nic_in_[node];
}

std::vector<LinkId> Topology::path(GpuId from, GpuId to) const {
  const std::int32_t from_node = node_of(from);
  const std::int32_t to_node = node_of(to);
  if (from == to) return {};
  if (from_node == to_node) return {up_[from.value], down_[to.value]};
  return {up_[from.value], nic_out_[from_node], nic_in_[to_node], down_[to.value]};
}

std::vector<FlowId> Topology::transfer(const std::vector<std::pair<GpuId, GpuId>>& shard_pairs,
                                       std::int64_t bytes_per_pair, std::function<void()> on_done) {
  std::vector<FlowId> flows;
  if (shard_pairs.empty()) {
    flows.push_back(network_->start_flow({}, 0, std::move(on_done)));
    return flows;
  }
  struct Join {
    std::size_t left;
    std::function<void()> on_done;
  };
  auto join = std::make_shared<Join>(Join{shard_pairs.size(), std::move(on_done)});
  flows.reserve(shard_pairs.size());
  for (const auto& [from, to] : shard_pairs) {
    flows.push_back(network_->start_flow(path(from, to), bytes_per_pair, [join] {
      if (--join->left == 0 && join->on_done) {
        std::function<void()> fn = std::move(join->on_done);
        fn();
      }
    }));
  }
  return flows;
}

}  // namespace ecoserve::sim
