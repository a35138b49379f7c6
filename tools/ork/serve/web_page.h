// The chat page ork serve answers at / (data/web/index.html, compiled in).
#pragma once

#include <string_view>

namespace ork::serve {

std::string_view web_page();

}  // namespace ork::serve
