// Room in the cache directory for a new conversion. Converted models are
// derived data, 4-6 GB each for a MoE GGUF: ork removes what can never be
// used again and, only when it must, what was used least recently, rather
// than fill the disk a conversion at a time.
//
// - An entry records the identity of the source it was made from (path,
//   size, modification time, inode, ork's conversion version). One whose
//   source has changed, moved or gone can never be opened again: it is
//   stale, and removed whenever a new entry is made.
// - Then, least recently used first (an entry's modification time, set at
//   each use; reading its header leaves it), entries go until the
//   converted models together fit ORK_CACHE_MAX (if set) and the disk keeps
//   ORK_CACHE_MIN_FREE free after the new entry (default: 5 % of the disk,
//   at least 1 GiB).
// - If even removing all of them would not make room, none is removed and
//   the new entry is not kept: the model runs, converted, all the same.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "format/orkpack/orkpack.h"
#include "ork/status.h"

namespace ork::cli {

// The metadata a new entry of `source` carries (PackOptions::extra_metadata).
std::vector<std::pair<std::string, std::string>> entry_identity_metadata(const std::string& identity,
                                                                         const std::string& source_realpath,
                                                                         const std::string& npu_profile);

// An entry opened for its metadata only: its tensors' values are not read
// (a carried tier's block headers run through the whole file - gigabytes
// for a MoE GGUF's conversion - and the loader checks them when it runs it).
Result<OrkpackFile> open_entry_headers(const std::string& path);

enum class EntryState {
  kCurrent,  // its source is as it was: a run of that source opens it
  kStale,    // its source changed or is gone: never opened again
  kUnknown,  // made before entries recorded their source
};
EntryState entry_state(const OrkpackFile& entry);
const char* entry_state_name(EntryState s);

// Makes room for an entry of about `bytes` at `entry` (which is not itself
// removed), as above; what it removes is said on stderr. kResourceExhausted
// when there is no room (say why, keep nothing); kInvalidArgument for an
// ORK_CACHE_MAX or ORK_CACHE_MIN_FREE that is not a size.
Status make_room(const std::string& entry, uint64_t bytes);

// An entry was opened: it is the most recently used.
void mark_used(const std::string& entry);

}  // namespace ork::cli
