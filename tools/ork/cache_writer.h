// Saving a conversion made in memory as a cache entry without making the
// user wait for the disk: a detached process (a fork, so it sees the image
// as it was, whatever this process does next) writes it to a temporary
// beside the entry, syncs it and renames it into place, and exits. The
// model runs from memory meanwhile, and ork may exit first. An entry is
// only ever its complete, synced bytes under its final name; a writer that
// is killed leaves a temporary (`.<entry>.ork-w<pid>`) that no run trusts,
// which `ork cache ls|rm` show and remove and the next conversion of the
// same source clears once it is stale.
#pragma once

#include <string>

#include "core/mapped_file.h"
#include "ork/status.h"

namespace ork::cli {

// Starts saving `image` as `entry`. Fails - before anything runs in the
// background - when the temporary cannot be made or the disk has no room
// for it (nothing is left behind then).
Status save_detached(const MappedFile& image, const std::string& entry);

// Removes temporaries of `entry` left by writers that died (not written to
// for ten minutes).
void clear_stale_temporaries(const std::string& entry);

}  // namespace ork::cli
