#include "core/cache_dir.h"

#include <cstdlib>

namespace ork {

std::string cache_dir() {
  const char* own = std::getenv("ORK_CACHE_DIR");
  if (own != nullptr && *own != '\0') return own;
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/ork";
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return std::string(home) + "/.cache/ork";
  return "/tmp/ork-cache";
}

}  // namespace ork
