// Topology: the links of a GPU cluster in a SimNetwork, and the paths between GPUs.
//
// num_nodes nodes of gpus_per_node GPUs each. Inside a node every GPU has an up link
// (GPU -> switch) and a down link (switch -> GPU) of intra_bytes_per_s each (NVLink or
// PCIe, per direction); between nodes every node has a NIC-out and a NIC-in link of
// inter_node_gbps each. Paths:
//   same GPU                    -> []                                 (free and instant)
//   same node                   -> [up(from), down(to)]
//   other node                  -> [up(from), nic_out(node(from)), nic_in(node(to)), down(to)]
// Latency: intra_latency is the one-way GPU-to-GPU latency inside a node (it sits on
// the up links), inter_latency what crossing to another node adds (on the NIC-out
// links): a same-node path pays intra_latency, a cross-node one intra + inter.
//
// Ownership: the links belong to the SimNetwork, which must outlive the Topology; the
// Topology only records their ids. Threads: the SimNetwork's (simulation thread only).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "base/ids.h"
#include "base/status.h"
#include "sim/sim_network.h"

namespace ecoserve::sim {

// A GPU of the cluster: node * gpus_per_node + index within the node.
using GpuId = StrongId<struct GpuIdTag, std::int32_t>;

// Per-direction defaults: NVLink 3 (A100: 600 GB/s both ways), PCIe 4.0 x16.
inline constexpr double kNvlinkBytesPerS = 300e9;
inline constexpr double kPcieBytesPerS = 32e9;

struct TopologyOptions {
  std::int32_t num_nodes = 1;       // >= 1
  std::int32_t gpus_per_node = 8;   // >= 1
  std::string intra = "nvlink";     // "nvlink" | "pcie"
  double intra_bytes_per_s = 0;     // per GPU per direction; 0 = the default of `intra`
  Duration intra_latency = Duration(2'000);    // one-way GPU to GPU in a node, >= 0
  double inter_node_gbps = 100;     // per NIC per direction (10/25/100/200/400), > 0
  Duration inter_latency = Duration(5'000);    // added by crossing nodes, >= 0
};

class Topology {
 public:
  // INVALID_ARGUMENT naming the bad field, or OK.
  static Status validate(const TopologyOptions& options);
  // Validates `options` and adds the cluster's links to `network`.
  static StatusOr<Topology> create(SimNetwork& network, TopologyOptions options);

  const TopologyOptions& options() const { return options_; }
  std::int32_t num_nodes() const { return options_.num_nodes; }
  std::int32_t gpus_per_node() const { return options_.gpus_per_node; }
  std::int32_t num_gpus() const { return options_.num_nodes * options_.gpus_per_node; }
  double intra_bytes_per_s() const { return intra_bytes_per_s_; }  // resolved default
  double inter_bytes_per_s() const { return options_.inter_node_gbps * 1e9 / 8; }

  bool contains(GpuId gpu) const { return gpu.value >= 0 && gpu.value < num_gpus(); }
  // Preconditions (CHECKed): node and index in range / contains(gpu).
  GpuId gpu(std::int32_t node, std::int32_t index_in_node) const;
  std::int32_t node_of(GpuId gpu) const;
  LinkId gpu_up(GpuId gpu) const;
  LinkId gpu_down(GpuId gpu) const;
  LinkId nic_out(std::int32_t node) const;
  LinkId nic_in(std::int32_t node) const;

  // The links from one GPU to another (see the header comment). CHECKs contains().
  std::vector<LinkId> path(GpuId from, GpuId to) const;

  // Sends bytes_per_pair from each pair's first GPU to its second, all at once (one
  // flow per tensor-parallel shard pair); on_done runs once, when every flow has been
  // delivered (with no pairs: at now(), as an event). Returns the flows; cancelling
  // any of them means on_done never runs (cancel them all).
  std::vector<FlowId> transfer(const std::vector<std::pair<GpuId, GpuId>>& shard_pairs,
                               std::int64_t bytes_per_pair, std::function<void()> on_done);

  SimNetwork& network() const { return *network_; }

 private:
  Topology(SimNetwork& network, TopologyOptions options);

  SimNetwork* network_;
  TopologyOptions options_;
  double intra_bytes_per_s_ = 0;
  std::vector<LinkId> up_, down_, nic_out_, nic_in_;
};

}  // namespace ecoserve::sim
