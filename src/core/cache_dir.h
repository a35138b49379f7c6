// Where ork keeps what it can rebuild (converted models, the performance
// model): $ORK_CACHE_DIR, else $XDG_CACHE_HOME/ork, else ~/.cache/ork,
// else /tmp/ork-cache. Not created here.
#pragma once

#include <string>

namespace ork {

std::string cache_dir();

}  // namespace ork
