#include "serve/web_page.h"

namespace ork::serve {

std::string_view web_page() {
  static constexpr char kPage[] =
#include "web_page.inc"
      ;
  return {kPage, sizeof(kPage) - 1};
}

}  // namespace ork::serve
