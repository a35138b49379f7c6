// vnpu device profiles (data/npu_profiles.txt, compiled in): the figures a
// job's modeled device time comes from. Every figure in the file names its
// public source, or says it is an estimate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ork/status.h"

namespace ork::npu {

struct DeviceProfile {
  std::string name;
  int cores = 1;
  int workers = 1;
  int64_t vtcm_bytes = 0;
  double int8_tops = 0;
  double int4_tops = 0;
  double dma_gbps = 0;
  double submit_blocking_us = 0;
  double submit_doorbell_us = 0;
  double map_us = 0;
  int64_t window_bytes = 0;
};

// Parses profiles from text (the file's format); errors name the line.
Result<std::vector<DeviceProfile>> parse_profiles(const std::string& text, const std::string& source);

// The compiled-in profiles.
const std::vector<DeviceProfile>& builtin_profiles();
Result<DeviceProfile> find_profile(const std::string& name);

}  // namespace ork::npu
