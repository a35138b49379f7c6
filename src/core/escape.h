// Text that came from a file (tensor names, metadata, token pieces) made
// safe to print on a terminal: a crafted name must not be able to move the
// cursor, retitle the window or hide what follows. Control characters (C0,
// DEL and C1), and bytes that are not valid UTF-8, become \xNN; everything
// else, non-ASCII text included, is kept as it is.
#pragma once

#include <string>
#include <string_view>

namespace ork {

// For names and values in messages and tables: every control escaped.
std::string escape_text(std::string_view text);
// For generated text: the same, but tab, newline and carriage return pass.
std::string escape_stream_text(std::string_view text);

}  // namespace ork
