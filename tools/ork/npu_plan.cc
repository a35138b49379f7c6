#include "npu_plan.h"

#include <cstdio>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "dispatch/router.h"
#include "engines/npu/npu_engine.h"
#include "engines/npu/profile.h"
#include "format/gguf/gguf.h"
#include "model/overlay_reach.h"
#include "quant/planner.h"

namespace ork::cli {

Status plan_for_npu(const std::string& profile_name, PackOptions& o) {
  ORK_ASSIGN_OR_RETURN(npu::DeviceProfile profile, npu::find_profile(profile_name));
  ORK_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::open(o.input));
  npu::VnpuOptions vo;
  vo.profile = profile;
  vo.compute = false;  // its predictions only
  ORK_ASSIGN_OR_RETURN(std::unique_ptr<npu::NpuEngine> engine, npu::NpuEngine::create(vo));
  ReachOptions ro;
  ro.cpu_gbps = profile.cpu_gbps;
  using Shares = std::map<std::string, double>;
  ORK_ASSIGN_OR_RETURN(Shares reach, overlay_reach(gguf, *engine, ro));
  o.candidates = {Tier::kI4, Tier::kNf4, Tier::kI8s};
  // A unit's share is its tensor's (an expert's "<tensor>.e<i>" its 3-D
  // tensor's); a tensor the forward does not run as a matmul keeps i8s's
  // int8 error (what its reads see).
  auto shares = std::make_shared<Shares>(std::move(reach));
  o.i8s_decode_share = [shares](const std::string& unit) {
    const auto it = shares->find(matrix_group(unit));
    return it == shares->end() ? 1.0 : it->second;
  };
  // Where the overlay lands, by tensor role, averaged over layers.
  std::map<std::string, std::pair<double, int>> by_role;
  for (const auto& [name, share] : *shares) {
    auto& r = by_role[std::string(overlay_role(name.c_str()))];
    r.first += share;
    ++r.second;
  }
  std::string reached;
  for (const auto& [role, r] : by_role) {
    if (r.first > 0) reached += fmt::format("{}{} {:.2f}", reached.empty() ? "" : ", ", role, r.first / r.second);
  }
  std::fprintf(stderr,
               "ork: planning for %s: tiers i4, nf4 (via int8) and i8s (the overlay's sensitive set), i8s priced by "
               "the share of decode the overlay is predicted to reach: %s\n",
               profile.name.c_str(), reached.empty() ? "none (every job would land after its consumer)" : reached.c_str());
  return Status::ok();
}

}  // namespace ork::cli
