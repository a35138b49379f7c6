// Tokenizers read from GGUF metadata (`tokenizer.ggml.*`), matching
// llama.cpp's token ids exactly:
//   - "llama": SentencePiece-style, score-driven merges with byte fallback;
//   - "gpt2": byte-level BPE with merge ranks, after a pre-tokenizer chosen
//     by `tokenizer.ggml.pre` (llama-bpe, qwen2, gpt-2, falcon,
//     deepseek-llm, deepseek-coder, starcoder, refact, mpt, ...);
//   - "bert": WordPiece (BERT-family embedders).
//
// Thread-safe after construction (encode/decode are const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/gguf/gguf.h"

namespace ork {

// Token types as GGUF stores them (tokenizer.ggml.token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class TokenizerKind { kSpm, kBpe, kWpm };

class PreTokenizer;

class Tokenizer {
 public:
  ~Tokenizer();
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& gguf);

  // add_special: prepend BOS (and append EOS) where the vocabulary asks.
  // parse_special: recognise control tokens written in the text ("<s>");
  // user-defined tokens are always recognised, as llama.cpp does.
  std::vector<int32_t> encode(const std::string& text, bool add_special, bool parse_special = false) const;

  // The bytes a token stands for (control tokens give "" unless `special`).
  std::string piece(int32_t id, bool special = false) const;
  // Concatenated pieces; drops the leading space SentencePiece adds when the
  // sequence starts at the beginning of the text.
  std::string decode(const std::vector<int32_t>& ids, bool special = false) const;

  TokenizerKind kind() const { return kind_; }
  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool add_bos() const { return add_bos_; }
  bool add_space_prefix() const { return add_space_prefix_; }
  bool is_end_of_generation(int32_t id) const;
  const std::string& token_text(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int32_t find(const std::string& text) const;
  const std::string& pre() const { return pre_; }

 private:
  Tokenizer() = default;
  void encode_fragment(const std::string& text, bool at_start, std::vector<int32_t>& out) const;
  void encode_spm(const std::string& text, std::vector<int32_t>& out) const;
  void encode_bpe_word(const std::string& word, std::vector<int32_t>& out) const;
  void encode_wpm(const std::string& text, std::vector<int32_t>& out) const;
  void byte_fallback(uint8_t byte, std::vector<int32_t>& out) const;
  int bpe_rank(std::string_view left, std::string_view right) const;

  TokenizerKind kind_ = TokenizerKind::kSpm;
  std::string pre_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenType> types_;
  std::unordered_map<std::string, int32_t> token_index_;
  std::unordered_map<std::string, int> merge_ranks_;  // "left right" -> rank
  std::vector<int32_t> specials_;  // longest text first
  std::vector<int32_t> byte_tokens_;  // SPM: id of <0xXX>, or -1
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  int32_t bos_ = -1, eos_ = -1, unk_ = -1, eot_ = -1;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = true, ignore_merges_ = false;
  size_t max_token_len_ = 0;  // bytes of the longest token text (WordPiece's search window)
};

}  // namespace ork
