#include "model/tokenizer/tokenizer.h"

#include <algorithm>

#include "model/tokenizer/pre_tokenizer.h"
#include "model/tokenizer/unicode.h"

namespace ork {

Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& gguf) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  const std::string& path = gguf.path();
  ORK_ASSIGN_OR_RETURN(const std::string model, gguf.get_string("tokenizer.ggml.model"));
  if (model == "llama") {
    tok->kind_ = TokenizerKind::kSpm;
  } else if (model == "gpt2") {
    tok->kind_ = TokenizerKind::kBpe;
  } else if (model == "bert") {
    tok->kind_ = TokenizerKind::kWpm;
  } else {
    return error(StatusCode::kUnsupported, "{}: tokenizer.ggml.model '{}' is not supported (llama, gpt2, bert)", path,
                 model);
  }
  const GgufValue* tokens = gguf.find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->elem_type != GgufValueType::kString || tokens->strings.empty()) {
    return error(StatusCode::kCorrupt, "{}: tokenizer.ggml.tokens is missing or not an array of strings", path);
  }
  tok->tokens_ = tokens->strings;
  const size_t n = tok->tokens_.size();
  if (n > (1u << 30)) return error(StatusCode::kCorrupt, "{}: tokenizer.ggml.tokens has {} entries", path, n);

  tok->scores_.assign(n, 0.0f);
  if (const GgufValue* s = gguf.find("tokenizer.ggml.scores")) {
    if (s->floats.size() != n) {
      return error(StatusCode::kCorrupt, "{}: tokenizer.ggml.scores has {} entries for {} tokens", path,
                   s->array_size(), n);
    }
    for (size_t i = 0; i < n; ++i) tok->scores_[i] = static_cast<float>(s->floats[i]);
  }
  tok->types_.assign(n, TokenType::kNormal);
  if (const GgufValue* t = gguf.find("tokenizer.ggml.token_type")) {
    if (t->ints.size() != n) {
      return error(StatusCode::kCorrupt, "{}: tokenizer.ggml.token_type has {} entries for {} tokens", path,
                   t->array_size(), n);
    }
    for (size_t i = 0; i < n; ++i) tok->types_[i] = static_cast<TokenType>(t->ints[i]);
  }
  tok->token_index_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    tok->token_index_.emplace(tok->tokens_[i], static_cast<int32_t>(i));
    tok->max_token_len_ = std::max(tok->max_token_len_, tok->tokens_[i].size());
  }

  auto special_id = [&](const char* key, int32_t fallback) -> int32_t {
    const auto v = gguf.find_int(key);
    if (!v) return fallback;
    return *v >= 0 && static_cast<uint64_t>(*v) < n ? static_cast<int32_t>(*v) : -1;
  };
  const bool spm = tok->kind_ == TokenizerKind::kSpm;
  const bool wpm = tok->kind_ == TokenizerKind::kWpm;
  // BERT's [CLS] ... [SEP] play the roles of BOS and EOS.
  tok->bos_ = special_id(wpm ? "tokenizer.ggml.cls_token_id" : "tokenizer.ggml.bos_token_id", spm ? 1 : wpm ? 101 : -1);
  tok->eos_ = special_id(wpm ? "tokenizer.ggml.seperator_token_id" : "tokenizer.ggml.eos_token_id",
                         spm ? 2 : wpm ? 102 : -1);
  tok->unk_ = special_id("tokenizer.ggml.unknown_token_id", spm ? 0 : wpm ? 100 : -1);
  tok->eot_ = special_id("tokenizer.ggml.eot_token_id", -1);
  tok->add_bos_ = gguf.find_bool("tokenizer.ggml.add_bos_token").value_or(spm || wpm);
  tok->add_eos_ = gguf.find_bool("tokenizer.ggml.add_eos_token").value_or(wpm);
  tok->add_space_prefix_ = gguf.find_bool("tokenizer.ggml.add_space_prefix").value_or(spm);

  if (wpm) {
    // No merges, no pre-tokenizer: WordPiece needs only the vocabulary.
  } else if (spm) {
    tok->byte_tokens_.assign(256, -1);
    for (int b = 0; b < 256; ++b) tok->byte_tokens_[static_cast<size_t>(b)] = tok->find(fmt::format("<0x{:02X}>", b));
  } else {
    const GgufValue* merges = gguf.find("tokenizer.ggml.merges");
    if (merges == nullptr || merges->elem_type != GgufValueType::kString) {
      return error(StatusCode::kCorrupt, "{}: tokenizer.ggml.merges is missing (needed by a gpt2 tokenizer)", path);
    }
    tok->merge_ranks_.reserve(merges->strings.size());
    for (size_t i = 0; i < merges->strings.size(); ++i) {
      tok->merge_ranks_.emplace(merges->strings[i], static_cast<int>(i));
    }
    tok->pre_ = gguf.find_string("tokenizer.ggml.pre").value_or("default");
    auto pre = PreTokenizer::create(tok->pre_);
    if (!pre.is_ok()) return pre.status().with_context(path);
    tok->pre_tokenizer_ = std::move(pre).value();
    // Llama 3 emits a whole pre-token as one token when the vocabulary has it.
    tok->ignore_merges_ = tok->pre_ == "llama-bpe" || tok->pre_ == "llama3";
    if (!gguf.find_bool("tokenizer.ggml.add_bos_token") && (tok->pre_ == "llama-bpe" || tok->pre_ == "llama3")) {
      tok->add_bos_ = true;
    }
  }

  // Tokens matched literally in text before tokenizing it, longest first.
  for (size_t i = 0; i < n; ++i) {
    const TokenType t = tok->types_[i];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) {
      if (!tok->tokens_[i].empty()) tok->specials_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(tok->specials_.begin(), tok->specials_.end(), [&](int32_t a, int32_t b) {
    return tok->tokens_[static_cast<size_t>(a)].size() > tok->tokens_[static_cast<size_t>(b)].size();
  });
  return tok;
}

int32_t Tokenizer::find(const std::string& text) const {
  const auto it = token_index_.find(text);
  return it == token_index_.end() ? -1 : it->second;
}

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return id >= 0 && (id == eos_ || id == eot_);
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_special, bool parse_special) const {
  // Split the text around special tokens: fragments are either raw text or
  // a token id. Control and unknown tokens only count when parse_special.
  struct Fragment {
    int32_t token;  // -1 for raw text
    std::string text;
  };
  std::vector<Fragment> fragments;
  if (!text.empty()) fragments.push_back({-1, text});  // empty text gives no tokens, not a lone space
  for (int32_t id : specials_) {
    const TokenType t = types_[static_cast<size_t>(id)];
    if (!parse_special && (t == TokenType::kControl || t == TokenType::kUnknown)) continue;
    const std::string& needle = tokens_[static_cast<size_t>(id)];
    std::vector<Fragment> next;
    for (Fragment& f : fragments) {
      if (f.token >= 0) {
        next.push_back(std::move(f));
        continue;
      }
      size_t start = 0;
      for (size_t at; (at = f.text.find(needle, start)) != std::string::npos; start = at + needle.size()) {
        if (at > start) next.push_back({-1, f.text.substr(start, at - start)});
        next.push_back({id, {}});
      }
      if (start < f.text.size()) next.push_back({-1, f.text.substr(start)});
    }
    fragments = std::move(next);
  }

  std::vector<int32_t> out;
  if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
  bool prev_special = true;  // SentencePiece prefixes a space at the start and after special tokens
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    encode_fragment(f.text, prev_special, out);
    prev_special = false;
  }
  if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
  return out;
}

void Tokenizer::encode_fragment(const std::string& text, bool after_special, std::vector<int32_t>& out) const {
  if (kind_ == TokenizerKind::kSpm) {
    std::string escaped = add_space_prefix_ && after_special ? "\xE2\x96\x81" : "";
    for (char c : text) {
      if (c == ' ') escaped += "\xE2\x96\x81";  // U+2581, SentencePiece's visible space
      else escaped += c;
    }
    encode_spm(escaped, out);
    return;
  }
  if (kind_ == TokenizerKind::kWpm) {
    encode_wpm(text, out);
    return;
  }
  for (const std::string& word : pre_tokenizer_->split(text)) {
    std::string encoded;
    for (char c : word) encoded += unicode::byte_to_bpe_char(static_cast<uint8_t>(c));
    encode_bpe_word(encoded, out);
  }
}

std::string Tokenizer::piece(int32_t id, bool special) const {
  if (id < 0 || id >= n_vocab()) return {};
  const std::string& text = tokens_[static_cast<size_t>(id)];
  switch (types_[static_cast<size_t>(id)]) {
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
      if (!special) return {};
      return text;
    case TokenType::kUserDefined: return text;
    case TokenType::kByte:
      if (text.size() == 6 && text.rfind("<0x", 0) == 0) {
        return std::string(1, static_cast<char>(std::stoi(text.substr(3, 2), nullptr, 16)));
      }
      return text;
    default: break;
  }
  std::string out;
  if (kind_ != TokenizerKind::kBpe) {  // SentencePiece and WordPiece both spell spaces as U+2581
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += text[i++];
      }
    }
    return out;
  }
  for (std::string_view ch : unicode::split_chars(text)) {
    uint8_t byte;
    if (unicode::bpe_char_to_byte(ch, &byte)) out += static_cast<char>(byte);
    else out += ch;
  }
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool special) const {
  std::string out;
  bool at_start = true;
  for (int32_t id : ids) {
    std::string p = piece(id, special);
    // SentencePiece's added space prefix and WordPiece's word-start mark
    // both become a leading space that is not part of the text.
    const bool prefixed = (kind_ == TokenizerKind::kSpm && add_space_prefix_) || kind_ == TokenizerKind::kWpm;
    if (at_start && prefixed && !p.empty() && p[0] == ' ' && types_[static_cast<size_t>(id)] == TokenType::kNormal) {
      p.erase(0, 1);
    }
    if (!p.empty() || types_[static_cast<size_t>(id)] == TokenType::kNormal) at_start = false;
    out += p;
  }
  return out;
}

}  // namespace ork
