// How much of each tensor's decode the int8 overlay can reach, before any
// pack exists: for planning a pack for an NPU (`ork pack --npu`).
//
// An overlay job lands only if the NPU finishes it before the CPU's
// consumer needs the result, and what the consumer waits for is set by the
// forward's groups (forward.cc, forward_moe.cc): q, k and v share an input
// and are consumed together by attention, so v's job has the time of all
// three; a dense FFN's gate and up likewise; a token's routed experts run
// gate and up for every expert, then every down, so a later expert's down
// has the earlier downs' time. A matmul consumed as soon as the CPU has it
// (attn_output, a dense ffn_down, the output head) has only its own time,
// in which the NPU - reading both planes, twice the CPU's bytes, from the
// same DRAM - does not finish on any profile ork knows.
//
// overlay_reach() replays that with the overlay's virtual clock
// (dispatch/overlay.h): each group starts with the device free (the clock
// opens only jobs that end before their consumer, so none outlives its
// group); in the CPU's order each member's job starts when its input
// exists and the device is free, is opened only if predicted to finish by
// the time the CPU has computed the group through that member, and then
// keeps the device busy. The CPU reads 4 bits and a row scale a weight
// (i4, nf4, an i8s high plane) at `cpu_gbps`; the device's time is its own
// prediction. On a pack of those tiers it is the clock's own count (test
// OverlayReach.*); a tier read at other bytes, a group the forward runs
// that this does not know (DeltaNet's projections: taken one by one), and
// the wall clock's own timing (routed downs finished out of order) make it
// an estimate.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "ork/status.h"

namespace ork {

class Engine;
class GgufFile;

struct ReachOptions {
  double cpu_gbps = 20;  // the device's CPU read rate (profile cpu_gbps)
  // Which tensors have an overlay job (null: every matrix the forward
  // groups or runs alone): only those keep the device busy.
  std::function<bool(const std::string& tensor)> overlaid;
};

// Per matrix tensor of `gguf` (its name; a routed experts' tensor once,
// for all its experts): the share of its decode matmuls whose NPU result
// would be ready in time, 0 to 1.
Result<std::map<std::string, double>> overlay_reach(const GgufFile& gguf, const Engine& npu, const ReachOptions& o);

}  // namespace ork
