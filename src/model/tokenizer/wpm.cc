// WordPiece (llama.cpp's "bert" vocabulary), as BERT-family embedders use
// it: NFD-normalise and lowercase, split on whitespace, isolate punctuation,
// ASCII symbols and CJK ideographs, then cover each word greedily with the
// longest vocabulary entries. Word-initial pieces carry SentencePiece's "▁"
// in the GGUF vocabulary (the converter rewrote BERT's "##" continuation
// marks that way). A word that cannot be covered becomes [UNK].
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace ork {
namespace {

bool is_chinese_char(UChar32 c) {
  // The ranges Hugging Face's BERT pre-tokenizer uses (0x2B920 as written there).
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_category(UChar32 c, uint32_t mask) { return (U_MASK(u_charType(c)) & mask) != 0; }

std::vector<std::string> wpm_words(const std::string& text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
  // Invalid UTF-8 becomes U+FFFD, which is then dropped.
  icu::UnicodeString normalized = icu::UnicodeString::fromUTF8(text);
  if (U_SUCCESS(status)) normalized = nfd->normalize(normalized, status);
  std::vector<std::string> words(1);
  for (int32_t i = 0; i < normalized.length();) {
    const UChar32 c = normalized.char32At(i);
    i += U16_LENGTH(c);
    if (u_isUWhiteSpace(c)) {
      if (!words.back().empty()) words.emplace_back();
      continue;
    }
    // Controls go; so do combining accents (Mn) left by NFD: BERT strips accents.
    if (c == 0 || c == 0xFFFD || is_category(c, U_GC_C_MASK | U_GC_MN_MASK)) continue;
    std::string s;
    unicode::append_utf8(s, static_cast<uint32_t>(u_tolower(c)));
    if (is_category(c, U_GC_P_MASK) || (c < 0x7F && is_category(c, U_GC_S_MASK)) || is_chinese_char(c)) {
      if (!words.back().empty()) words.emplace_back();
      words.back() = s;
      words.emplace_back();
    } else {
      words.back() += s;
    }
  }
  if (words.back().empty()) words.pop_back();
  return words;
}

}  // namespace

void Tokenizer::encode_wpm(const std::string& text, std::vector<int32_t>& out) const {
  for (const std::string& word : wpm_words(text)) {
    const std::string w = "\xE2\x96\x81" + word;
    const size_t start = out.size();
    for (size_t i = 0; i < w.size();) {
      bool matched = false;
      for (size_t j = std::min(w.size(), i + max_token_len_ + 1); j > i; --j) {
        const int32_t id = find(w.substr(i, j - i));
        if (id >= 0) {
          out.push_back(id);
          i = j;
          matched = true;
          break;
        }
      }
      if (!matched) {
        out.resize(start);
        break;
      }
    }
    if (out.size() == start && unk_ >= 0) out.push_back(unk_);
  }
}

}  // namespace ork
