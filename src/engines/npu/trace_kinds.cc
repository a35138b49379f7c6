#include "engines/npu/trace_kinds.h"

namespace ork::npu {

const char* trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kDmaPush: return "dma_push";
    case TraceKind::kDmaWait: return "dma_wait";
    case TraceKind::kCompute: return "compute";
    case TraceKind::kFence: return "fence";
    case TraceKind::kFlush: return "flush";
    case TraceKind::kMap: return "map";
    case TraceKind::kUnmap: return "unmap";
    case TraceKind::kSubmit: return "submit";
  }
  return "?";
}

}  // namespace ork::npu
