// Small UTF-8 and byte-level helpers for the tokenizers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ork::unicode {

// Length in bytes of the UTF-8 sequence starting with `lead` (1 for an
// invalid lead byte, so malformed text still advances byte by byte).
size_t utf8_len(uint8_t lead);

// Splits text into UTF-8 characters; malformed bytes become 1-byte pieces.
std::vector<std::string_view> split_chars(std::string_view text);

// Appends the UTF-8 encoding of code point `cp`.
void append_utf8(std::string& out, uint32_t cp);

// GPT-2's reversible byte <-> printable code point mapping used by
// byte-level BPE vocabularies ("Ġ" is the space byte).
const std::string& byte_to_bpe_char(uint8_t byte);
// Inverse; returns false if `ch` is not one of the 256 mapped characters.
bool bpe_char_to_byte(std::string_view ch, uint8_t* byte);

}  // namespace ork::unicode
