// Tokenizers against llama.cpp's own test vectors: every .inp/.out pair in
// vocab/ and fixtures/vocab/, plus 20 KB of WikiText per vocabulary.
#include "model/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "model/tokenizer/pre_tokenizer.h"
#include "testdata.h"

namespace ork {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// .inp: test strings separated by "\n__ggml_vocab_test__\n"; .out: one line
// of space-separated ids per string (no BOS).
std::vector<std::string> read_inputs(const std::string& path) {
  const std::string raw = slurp(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      out.push_back(raw.substr(pos));
      break;
    }
    out.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ids(line);
    std::vector<int32_t> v;
    int32_t id;
    while (ids >> id) v.push_back(id);
    out.push_back(v);
  }
  return out;
}

std::vector<int32_t> read_id_lines(const std::string& path) {
  std::vector<int32_t> out;
  std::istringstream in(slurp(path));
  int32_t id;
  while (in >> id) out.push_back(id);
  return out;
}

std::unique_ptr<Tokenizer> load(const std::string& gguf_path) {
  auto gguf = GgufFile::open(gguf_path);
  EXPECT_TRUE(gguf.is_ok()) << gguf.status().to_string();
  if (!gguf.is_ok()) return nullptr;
  auto tok = Tokenizer::from_gguf(*gguf);
  EXPECT_TRUE(tok.is_ok()) << tok.status().to_string();
  return tok.is_ok() ? std::move(tok).value() : nullptr;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

struct VocabCase {
  const char* name;
  const char* gguf_dir;   // where the vocabulary GGUF is
  const char* tests_dir;  // where the .inp/.out pair is
};

class VocabVectors : public ::testing::TestWithParam<VocabCase> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
  const VocabCase c = GetParam();
  const std::string gguf = std::string(c.gguf_dir) + "/ggml-vocab-" + c.name + ".gguf";
  const std::string inp = std::string(c.tests_dir) + "/ggml-vocab-" + c.name + ".gguf.inp";
  ORK_REQUIRE_TESTDATA(gguf);
  ORK_REQUIRE_TESTDATA(inp);
  auto tok = load(testing::testdata(gguf));
  ASSERT_NE(tok, nullptr);
  const auto inputs = read_inputs(testing::testdata(inp));
  const auto outputs = read_outputs(testing::testdata(std::string(c.tests_dir) + "/ggml-vocab-" + c.name + ".gguf.out"));
  ASSERT_EQ(inputs.size(), outputs.size());
  ASSERT_GT(inputs.size(), 10u);
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto got = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    if (got != outputs[i]) {
      ++failures;
      ADD_FAILURE() << c.name << " case " << i << " '" << inputs[i] << "'\n  got: " << show(got)
                    << "\n want: " << show(outputs[i]);
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(All, VocabVectors,
                         ::testing::Values(VocabCase{"llama-spm", "vocab", "vocab"},
                                           VocabCase{"phi-3", "vocab", "vocab"},
                                           VocabCase{"llama-bpe", "fixtures/vocab", "vocab"},
                                           VocabCase{"qwen2", "fixtures/vocab", "vocab"},
                                           VocabCase{"gpt-2", "vocab", "vocab"},
                                           VocabCase{"falcon", "vocab", "vocab"},
                                           VocabCase{"deepseek-llm", "vocab", "vocab"},
                                           VocabCase{"deepseek-coder", "vocab", "vocab"},
                                           VocabCase{"starcoder", "vocab", "vocab"},
                                           VocabCase{"refact", "vocab", "vocab"},
                                           VocabCase{"mpt", "vocab", "vocab"},
                                           VocabCase{"bert-bge", "vocab", "vocab"}),
                         [](const auto& param_info) {
                           std::string n = param_info.param.name;
                           for (char& ch : n) if (ch == '-') ch = '_';
                           return n;
                         });

// The fixtures' own copies of the llama-bpe and qwen2 vectors.
TEST(VocabVectors, FixtureCopiesAgree) {
  for (const char* name : {"llama-bpe", "qwen2"}) {
    const std::string base = std::string("fixtures/vocab/ggml-vocab-") + name + ".gguf";
    ORK_REQUIRE_TESTDATA(base + ".inp");
    auto tok = load(testing::testdata(base));
    ASSERT_NE(tok, nullptr);
    const auto inputs = read_inputs(testing::testdata(base + ".inp"));
    const auto outputs = read_outputs(testing::testdata(base + ".out"));
    ASSERT_EQ(inputs.size(), outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(tok->encode(inputs[i], false, false), outputs[i]) << name << " case " << i;
    }
  }
}

// 20 KB of WikiText through three vocabularies: long real text.
TEST(VocabVectors, Wiki20k) {
  struct Wiki {
    const char* gguf;
    const char* ids;
  };
  ORK_REQUIRE_TESTDATA("fixtures/vocab/wiki-20k.txt");
  const std::string text = slurp(testing::testdata("fixtures/vocab/wiki-20k.txt"));
  for (const Wiki& w : {Wiki{"fixtures/vocab/ggml-vocab-qwen2.gguf", "fixtures/vocab/wiki-20k.qwen2.tok"},
                        Wiki{"fixtures/vocab/ggml-vocab-llama-bpe.gguf", "fixtures/vocab/wiki-20k.llama-bpe.tok"},
                        Wiki{"models/stories260K-f32.gguf", "fixtures/vocab/wiki-20k.stories260K-spm.tok"}}) {
    auto tok = load(testing::testdata(w.gguf));
    ASSERT_NE(tok, nullptr);
    const auto want = read_id_lines(testing::testdata(w.ids));
    const auto got = tok->encode(text, false, false);
    ASSERT_EQ(got.size(), want.size()) << w.gguf;
    EXPECT_EQ(got, want) << w.gguf;
  }
}

// The prompts behind the golden logits: BOS + "Once upon a time".
TEST(Tokenizer, GoldenPrompts) {
  for (const char* name : {"stories260K", "tinystories656K"}) {
    const std::string model = std::string("models/") + name + "-f32.gguf";
    ORK_REQUIRE_TESTDATA(model);
    auto tok = load(testing::testdata(model));
    ASSERT_NE(tok, nullptr);
    const auto want = read_id_lines(testing::testdata(std::string("golden/") + name + "_once_upon_a_time.prompt_ids"));
    EXPECT_EQ(tok->encode("Once upon a time", true), want) << name;
  }
}

TEST(Tokenizer, DecodeReproducesGoldenText) {
  ORK_REQUIRE_TESTDATA("models/stories260K-f32.gguf");
  auto tok = load(testing::testdata("models/stories260K-f32.gguf"));
  ASSERT_NE(tok, nullptr);
  const std::string raw = slurp(testing::testdata("golden/stories260K_greedy_256.ids"));
  std::vector<int32_t> ids;
  for (size_t i = raw.find('['); i != std::string::npos; i = raw.find('[', i + 1)) ids.push_back(std::stoi(raw.substr(i + 1)));
  const std::string text = tok->decode(ids);
  const std::string golden = slurp(testing::testdata("golden/stories260K_greedy_256.txt"));
  EXPECT_EQ(golden.rfind(text, 0), 0u) << "decoded:\n" << text;
}

TEST(Tokenizer, RoundTripsArbitraryBytes) {
  ORK_REQUIRE_TESTDATA("fixtures/vocab/ggml-vocab-qwen2.gguf");
  for (const char* path : {"fixtures/vocab/ggml-vocab-qwen2.gguf", "vocab/ggml-vocab-llama-spm.gguf"}) {
    auto tok = load(testing::testdata(path));
    ASSERT_NE(tok, nullptr);
    const std::string text = "Hello \xF0\x9F\xA6\x99 w\xC3\xB6rld\n\t  12345 \xE4\xBD\xA0\xE5\xA5\xBD!";
    std::string decoded = tok->decode(tok->encode(text, false));
    EXPECT_EQ(decoded, text) << path;
  }
}

TEST(Tokenizer, SpecialTokensParsedOnlyWhenAsked) {
  ORK_REQUIRE_TESTDATA("fixtures/vocab/ggml-vocab-qwen2.gguf");
  auto tok = load(testing::testdata("fixtures/vocab/ggml-vocab-qwen2.gguf"));
  ASSERT_NE(tok, nullptr);
  const auto parsed = tok->encode("<|im_start|>user", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed[0], tok->find("<|im_start|>"));
  const auto literal = tok->encode("<|im_start|>user", false, false);
  EXPECT_NE(literal[0], tok->find("<|im_start|>"));
  EXPECT_TRUE(tok->is_end_of_generation(tok->eos()));
}

TEST(PreTokenizer, UnknownNameIsAClearError) {
  auto pre = PreTokenizer::create("no-such-pre");
  ASSERT_FALSE(pre.is_ok());
  EXPECT_NE(pre.status().message().find("no-such-pre"), std::string::npos);
}

}  // namespace
}  // namespace ork

namespace ork {
namespace {

// Every vocabulary in the test data loads, and text without upper case or
// accents (which WordPiece folds) survives encode -> decode.
TEST(Tokenizer, EveryVocabularyLoadsAndRoundTrips) {
  ORK_REQUIRE_TESTDATA("vocab");
  int checked = 0;
  for (const auto& dir : {"vocab", "fixtures/vocab"}) {
    for (const auto& entry : std::filesystem::directory_iterator(testing::testdata(dir))) {
      if (entry.path().extension() != ".gguf") continue;
      auto tok = load(entry.path().string());
      ASSERT_NE(tok, nullptr) << entry.path();
      const std::string text = "hello world, this is a test of 42 tokens";
      std::string back = tok->decode(tok->encode(text, false));
      if (tok->kind() == TokenizerKind::kWpm) {
        // WordPiece drops the spaces before punctuation it isolated.
        EXPECT_EQ(back, "hello world , this is a test of 42 tokens") << entry.path();
      } else {
        EXPECT_EQ(back, text) << entry.path();
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 14);
}

}  // namespace
}  // namespace ork
