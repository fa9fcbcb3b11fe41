// Deployment: GPU placement (packed and paired), KV blocks from GPU memory, errors,
// and DistServe's low-affinity layout end to end: with paired placement and
// pd_dispatch's same-node preference every KV hand-off stays inside its node.
#include "sim/deployment.h"

#include <gtest/gtest.h>

namespace ecoserve::sim {
namespace {

DeploymentSpec fudg_spec(int32_t prefill, int32_t decode, const std::string& placement) {
  DeploymentSpec d;
  d.cluster.strategy = "fudg";
  d.model = "llama-2-7b";
  d.gpu = "a100-80gb";
  d.prefill.instances = prefill;
  d.decode.instances = decode;
  d.placement = placement;
  d.cluster.topology.gpus_per_node = 4;
  d.cluster.topology.num_nodes = 0;  // as many as needed
  return d;
}

// "p0@0 d0@1 ..." : each instance's name and first GPU.
std::string layout(const SimClusterOptions& o) {
  std::string s;
  for (const SimInstanceSpec& i : o.instances) {
    if (!s.empty()) s += ' ';
    s += i.options.name + "@" + std::to_string(i.gpus.front().value);
  }
  return s;
}

TEST(Deployment, PackedPlacesRolesInOrderAndPairedInterleavesInProportion) {
  auto packed = build_cluster(fudg_spec(2, 6, "packed"));
  ASSERT_TRUE(packed.ok()) << packed.status().message();
  EXPECT_EQ(layout(*packed), "p0@0 p1@1 d0@2 d1@3 d2@4 d3@5 d4@6 d5@7");
  EXPECT_EQ(packed->topology.num_nodes, 2);
  auto paired = build_cluster(fudg_spec(2, 6, "paired"));
  ASSERT_TRUE(paired.ok());
  // 1:3 - each node of 4 GPUs gets one prefill and three decode instances.
  EXPECT_EQ(layout(*paired), "p0@0 d0@1 d1@2 d2@3 p1@4 d3@5 d4@6 d5@7");
  auto even = build_cluster(fudg_spec(2, 2, "paired"));
  ASSERT_TRUE(even.ok());
  EXPECT_EQ(layout(*even), "p0@0 d0@1 p1@2 d1@3");
}

TEST(Deployment, TensorParallelInstancesDoNotStraddleNodes) {
  DeploymentSpec d = fudg_spec(1, 2, "packed");
  d.prefill.par.tp = 2;
  d.decode.par.tp = 4;
  auto o = build_cluster(d);
  ASSERT_TRUE(o.ok()) << o.status().message();
  // p0 on GPUs 0-1; d0 (4 GPUs) does not fit in the rest of node 0: GPUs 4-7; d1 8-11.
  EXPECT_EQ(layout(*o), "p0@0 d0@4 d1@8");
  EXPECT_EQ(o->topology.num_nodes, 3);
  EXPECT_EQ(o->instances[1].gpus.size(), 4u);
  EXPECT_GT(o->instances[1].options.executor.num_kv_blocks, o->instances[0].options.executor.num_kv_blocks);
}

TEST(Deployment, ErrorsNameWhatIsWrong) {
  EXPECT_EQ(build_cluster(fudg_spec(0, 2, "packed")).status().message(),
            "fudg needs prefill and decode instances (0 prefill, 2 decode)");
  EXPECT_EQ(build_cluster(fudg_spec(1, 1, "zigzag")).status().message(),
            "unknown placement 'zigzag' (packed, paired)");
  DeploymentSpec d = fudg_spec(4, 4, "packed");
  d.cluster.topology.num_nodes = 1;
  EXPECT_EQ(build_cluster(d).status().message(),
            "the deployment needs 2 nodes of 4 GPUs (8 GPUs placed), the cluster has 1");
}

TEST(Deployment, PairedHandOffsStayInsideTheirNode) {
  // 2 nodes x (1 prefill + 1 decode) over a slow 1 Gb/s NIC: a 512-token prompt of
  // Llama-2-7B (256 MiB of KV) would take 2.1 s across nodes and ~1 ms over NVLink.
  for (const bool prefer : {true, false}) {
    DeploymentSpec d = fudg_spec(2, 2, "paired");
    d.cluster.topology.gpus_per_node = 2;
    d.cluster.topology.inter_node_gbps = 1;
    d.cluster.dispatch.prefer_same_node = prefer;
    auto o = build_cluster(d);
    ASSERT_TRUE(o.ok()) << o.status().message();
    ASSERT_EQ(layout(*o), "p0@0 d0@1 p1@2 d1@3");
    auto cluster = SimCluster::create(*o);
    ASSERT_TRUE(cluster.ok());
    std::vector<SimRequest> reqs(40);
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].arrival_s = 0.05 * static_cast<double>(i);
      reqs[i].input_tokens = 512;
      reqs[i].output_tokens = 4;
    }
    auto r = (*cluster)->run(reqs);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stats.completed, 40);
    EXPECT_EQ(r->stats.kv_transfers, 40);
    const double mean_s = r->stats.kv_transfer_seconds / static_cast<double>(r->stats.kv_transfers);
    if (prefer) {
      EXPECT_LT(mean_s, 0.01) << "every hand-off inside its node";
    } else {
      EXPECT_GT(mean_s, 0.5) << "the roomiest decode instance is often across the NIC";
    }
  }
}

}  // namespace
}  // namespace ecoserve::sim
