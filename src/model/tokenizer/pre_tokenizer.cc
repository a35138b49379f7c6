#include "model/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <utility>

namespace ork {
namespace {

// The GPT-2 pattern, shared by several variants.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";

constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// DeepSeek LLM's letter class: Latin, Greek, Cyrillic, Armenian, Georgian,
// Cherokee and other cased scripts, as its tokenizer.json spells it out.
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
    "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
    "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";

struct Variant {
  const char* name;
  std::vector<const char*> regexes;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> kVariants = {
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {"llama-bpe", {kLlama3}},
      {"llama3", {kLlama3}},
      {"dbrx", {kLlama3}},
      {"smaug-bpe", {kLlama3}},
      {"qwen2", {kQwen2}},
      {"deepseek-r1-qwen", {kQwen2}},
      {"gpt-2", {kGpt2}},
      {"gpt2", {kGpt2}},
      {"mpt", {kGpt2}},
      {"olmo", {kGpt2}},
      {"jais", {kGpt2}},
      {"falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {"deepseek-llm",
       {"[\\r\\n]", kDeepseekLetters, "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+", "\\s+$",
        "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}+"}},
      {"deepseek-coder",
       {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+", "\\p{N}"}},
      {"starcoder", {"\\p{N}", kGpt2}},
      {"refact", {"\\p{N}", kGpt2}},
      {"command-r", {"\\p{N}", kGpt2}},
      {"smollm", {"\\p{N}", kGpt2}},
      {"codeshell", {"\\p{N}", kGpt2}},
  };
  return kVariants;
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  ~Regex() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

PreTokenizer::~PreTokenizer() = default;

std::string PreTokenizer::known_names() {
  std::string out;
  for (const Variant& v : variants()) out += (out.empty() ? "" : ", ") + std::string(v.name);
  return out;
}

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::create(const std::string& name) {
  const std::string key = name.empty() ? "default" : name;
  const Variant* variant = nullptr;
  for (const Variant& v : variants()) {
    if (key == v.name) variant = &v;
  }
  if (variant == nullptr) {
    return error(StatusCode::kUnsupported, "pre-tokenizer '{}' is not supported (known: {})", name, known_names());
  }
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  for (const char* pattern : variant->regexes) {
    auto regex = std::make_unique<Regex>();
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    // UTF + UCP: \s, \p{..} are Unicode-aware. Invalid UTF-8 in the input is
    // tolerated (it never matches a class) instead of failing the match.
    // DOLLAR_ENDONLY: "$" means the end of the piece, as in ECMAScript.
    regex->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err,
                                &err_offset, nullptr);
    if (regex->code == nullptr) {
      std::array<PCRE2_UCHAR, 256> msg{};
      pcre2_get_error_message(err, msg.data(), msg.size());
      return error(StatusCode::kInternal, "pre-tokenizer '{}': regex does not compile at {}: {}", key, err_offset,
                   reinterpret_cast<const char*>(msg.data()));
    }
    pcre2_jit_compile(regex->code, PCRE2_JIT_COMPLETE);  // optional speed-up; falls back to the interpreter
    regex->match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    pre->regexes_.push_back(std::move(regex));
  }
  return pre;
}

std::vector<std::string> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces = {text};
  std::vector<std::string_view> next;
  for (const auto& regex : regexes_) {
    next.clear();
    for (std::string_view piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t done = 0;  // bytes of `piece` already emitted
      size_t from = 0;
      while (from < piece.size()) {
        const int rc = pcre2_match(regex->code, subject, piece.size(), from, 0, regex->match, nullptr);
        if (rc < 0) break;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(regex->match);
        const size_t begin = ov[0], end = ov[1];
        if (end == begin) {  // an empty match splits nothing; step past one character
          from = begin + 1;
          while (from < piece.size() && (static_cast<uint8_t>(piece[from]) & 0xC0) == 0x80) ++from;
          continue;
        }
        if (begin > done) next.push_back(piece.substr(done, begin - done));
        next.push_back(piece.substr(begin, end - begin));
        done = from = end;
      }
      if (done < piece.size()) next.push_back(piece.substr(done));
    }
    std::swap(pieces, next);
  }
  return {pieces.begin(), pieces.end()};
}

}  // namespace ork
