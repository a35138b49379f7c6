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
  // The device's API takes only plain int8 matrices (RKNN's matmul API):
  // an i8s or nf4 weight reaches it as an int8 tile the host writes into a
  // staging buffer, one byte per weight at dma_gbps. Otherwise the device
  // combines planes / expands nf4 in its scratchpad after the DMA.
  bool host_int8_tiles = false;
  // The device's own CPU cores reading decode's weights (GB/s): the
  // overlay's virtual clock times the CPU's side with it, so that a hit
  // rate is the target device's, not this machine's.
  double cpu_gbps = 0;
};

// Parses profiles from text (the file's format); errors name the line.
Result<std::vector<DeviceProfile>> parse_profiles(const std::string& text, const std::string& source);

// The compiled-in profiles.
const std::vector<DeviceProfile>& builtin_profiles();
Result<DeviceProfile> find_profile(const std::string& name);

}  // namespace ork::npu
