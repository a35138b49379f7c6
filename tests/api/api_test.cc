// The public API (include/ork/ork.hpp and ork.h) as an embedding program
// uses it, on the built-in model's file (in the repository) and, for the
// cases needing a second model, tinystories656K from the shared test data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ork/ork.h"
#include "ork/ork.hpp"
#include "testdata.h"

namespace ork::api {
namespace {

const std::string kModel = std::string(ORK_SOURCE_DIR) + "/data/models/stories260K-f32.gguf";

std::unique_ptr<LoadedModel> load_model(const std::string& path = kModel) {
  auto m = LoadedModel::load(path);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

std::unique_ptr<Sampler> greedy() {
  SamplerOptions o;
  o.temperature = 0;
  return std::move(Sampler::create(o)).value();
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

int argmax(std::span<const float> v) { return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin()); }

TEST(Api, LoadsAndDescribesTheModel) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->architecture(), "llama");
  EXPECT_EQ(m->n_vocab(), 512);
  EXPECT_GT(m->n_params(), 200000u);
  EXPECT_TRUE(m->resident());
  EXPECT_EQ(m->bos(), 1);
  EXPECT_TRUE(m->is_end_of_generation(m->eos()));
}

TEST(Api, LoadErrorsNameTheFile) {
  auto m = LoadedModel::load("/nonexistent/model.gguf");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().to_string().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(Api, TokenizeRoundTrips) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::string text = "Once upon a time, there was a little dog.";
  std::vector<int32_t> ids = m->tokenize(text);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids[0], m->bos());
  std::string pieces;
  for (size_t i = 1; i < ids.size(); ++i) pieces += m->piece(ids[i]);
  EXPECT_EQ(m->detokenize(std::span(ids).subspan(1)), text);
  EXPECT_EQ(m->piece(-1), "");
  EXPECT_EQ(m->piece(m->n_vocab()), "");
}

// generate() is an eval loop with the sampler: greedy generation equals
// argmax over logits evaluated token by token.
TEST(Api, GenerateMatchesAHandWrittenGreedyLoop) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = m->tokenize("Once upon a time");
  auto s = std::move(Session::create(*m, {.n_ctx = 256})).value();
  auto sampler = greedy();
  GenerateOptions o;
  o.max_tokens = 24;
  o.ignore_eos = true;
  std::string streamed;
  auto r = s->generate(prompt, *sampler, o, [&](std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->stop_reason, "length");
  EXPECT_EQ(r->generated_tokens, 24);
  EXPECT_EQ(r->prompt_tokens, static_cast<int>(prompt.size()));
  EXPECT_EQ(r->prompt_evaluated, static_cast<int>(prompt.size()));
  EXPECT_EQ(streamed, r->text);

  auto by_hand = std::move(Session::create(*m, {.n_ctx = 256})).value();
  ASSERT_TRUE(by_hand->eval(prompt).is_ok());
  std::vector<int32_t> ids;
  for (int i = 0; i < 24; ++i) {
    const int32_t id = argmax(by_hand->logits());
    ids.push_back(id);
    if (i + 1 < 24) {
      ASSERT_TRUE(by_hand->eval(std::span(&id, 1)).is_ok());
    }
  }
  std::string expect;
  for (int32_t id : ids) expect += m->piece(id);
  EXPECT_EQ(r->text, expect);
  // The last sampled token is not evaluated: the cache holds prompt + 23.
  EXPECT_EQ(s->n_past(), static_cast<int>(prompt.size()) + 23);
}

TEST(Api, GenerateKeepsTheCachedPrefix) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  auto s = std::move(Session::create(*m, {.n_ctx = 256})).value();
  const std::vector<int32_t> first = m->tokenize("Once upon a time there was a cat");
  GenerateOptions o;
  o.max_tokens = 8;
  o.ignore_eos = true;
  auto a = s->generate(first, *greedy(), o);
  ASSERT_TRUE(a.is_ok());
  // The conversation so far plus more: only the new part is evaluated.
  std::vector<int32_t> next = s->tokens();
  const size_t cached = next.size();
  for (int32_t t : m->tokenize(" and a dog", false)) next.push_back(t);
  auto b = s->generate(next, *greedy(), o);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->prompt_evaluated, static_cast<int>(next.size() - cached));
  // And its answer is the one a fresh session gives.
  auto fresh = std::move(Session::create(*m, {.n_ctx = 256})).value();
  auto c = fresh->generate(next, *greedy(), o);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->prompt_evaluated, static_cast<int>(next.size()));
  EXPECT_EQ(b->text, c->text);
  // The same prompt again evaluates one token (for its logits) and agrees.
  auto d = s->generate(next, *greedy(), o);
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->prompt_evaluated, 1);
  EXPECT_EQ(d->text, c->text);
}

// A hybrid fixture's session that has answered "Once upon a time there was
// a cat" with 8 greedy tokens; its next turns, each checked against what a
// fresh session answers.
struct HybridTurns {
  std::unique_ptr<LoadedModel> m;
  std::unique_ptr<Session> s;
  GenerateOptions o;
  std::vector<int32_t> first;

  explicit HybridTurns(const std::string& fixture) : m(load_model(testing::testdata(fixture))) {
    if (m == nullptr) return;
    s = std::move(Session::create(*m, {.n_ctx = 512})).value();
    o.max_tokens = 8;
    o.ignore_eos = true;
    first = m->tokenize("Once upon a time there was a cat");
    EXPECT_TRUE(s->generate(first, *greedy(), o).is_ok());
  }
  // `tokens`' first `keep` then `text`.
  std::vector<int32_t> then(const std::vector<int32_t>& tokens, size_t keep, const std::string& text) const {
    std::vector<int32_t> t(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(keep));
    for (int32_t id : m->tokenize(text, false)) t.push_back(id);
    return t;
  }
  // The session answers `prompt` having evaluated `evaluated` of its
  // tokens, and as a fresh session does.
  void expect_turn(const std::vector<int32_t>& prompt, size_t evaluated) {
    auto r = s->generate(prompt, *greedy(), o);
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(r->prompt_evaluated, static_cast<int>(evaluated));
    auto f = std::move(Session::create(*m, {.n_ctx = 512})).value();
    EXPECT_EQ(r->text, std::move(f->generate(prompt, *greedy(), o)).value().text);
  }
};

// A hybrid model (lfm2: short convolutions keep a window of past inputs,
// not a cache): a prompt that shares a prefix with the session reuses it
// when the window still holds its inputs, starts over when it does not, and
// either way answers as a fresh session does.
TEST(Api, HybridSessionsReuseWhatTheirWindowHolds) {
  ORK_REQUIRE_TESTDATA("hybrid/lfm2-f32.gguf");
  HybridTurns h("hybrid/lfm2-f32.gguf");
  ASSERT_NE(h.m, nullptr);
  // Diverging two tokens before the end: within the window, kept.
  h.expect_turn(h.then(h.s->tokens(), h.s->tokens().size() - 2, " and a dog"),
                h.m->tokenize(" and a dog", false).size());
  // A long story, then a prompt diverging near its start: starts over.
  std::vector<int32_t> longer = h.s->tokens();
  for (int i = 0; i < 12; ++i) {
    for (int32_t t : h.m->tokenize(" and then the cat ran to the big tree", false)) longer.push_back(t);
  }
  ASSERT_TRUE(h.s->generate(longer, *greedy(), h.o).is_ok());
  const std::vector<int32_t> early = h.then(longer, 5, " a little girl");
  h.expect_turn(early, early.size());
}

// A DeltaNet model (qwen35): a next turn that keeps the prompt and changes
// the reply re-evaluates from the prompt's end (the state kept there), not
// from the start; one that changes the prompt starts over. Both answer as
// a fresh session does.
TEST(Api, DeltaNetSessionsGoBackToThePromptsEnd) {
  ORK_REQUIRE_TESTDATA("hybrid/qwen35-f32.gguf");
  HybridTurns h("hybrid/qwen35-f32.gguf");
  ASSERT_NE(h.m, nullptr);
  const std::vector<int32_t> next = h.then(h.s->tokens(), h.s->tokens().size() - 2, " and a dog");
  h.expect_turn(next, next.size() - h.first.size());
  const std::vector<int32_t> early = h.then(h.first, 3, " a little girl");
  h.expect_turn(early, early.size());
}

TEST(Api, StopStringsEndGenerationBeforeThemAndAreNeverStreamed) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = m->tokenize("Once upon a time");
  GenerateOptions o;
  o.max_tokens = 64;
  o.ignore_eos = true;
  auto full = std::move(Session::create(*m, {.n_ctx = 256})).value()->generate(prompt, *greedy(), o);
  ASSERT_TRUE(full.is_ok());
  ASSERT_GT(full->text.size(), 40u);
  // A stop string from the middle of the greedy text, spanning tokens.
  const std::string stop = full->text.substr(20, 6);
  const size_t first = full->text.find(stop);
  o.stop = {"\x01never", stop};
  std::string streamed;
  auto r = std::move(Session::create(*m, {.n_ctx = 256})).value()->generate(prompt, *greedy(), o, [&](std::string_view t) {
    streamed += t;
    return true;
  });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->stop_reason, "stop");
  EXPECT_EQ(r->text, full->text.substr(0, first));
  EXPECT_EQ(streamed, r->text);
}

// The stream alone, piece by piece: a stop string straddling pieces, a
// UTF-8 character split across pieces, a false start of a stop string.
TEST(TextStream, HoldsBackPartialCharactersAndStopPrefixes) {
  api::TextStream s({"</s>", "\n\n"});
  std::string shown;
  for (std::string_view piece : {"Hi", " <", "/x", "\xc3", "\xa9", "!<", "/", "s", "> never"}) {
    shown += s.push(piece);
    if (s.stopped()) break;
    // Everything shown so far is whole characters and the start of no stop.
    EXPECT_EQ(shown, s.text().substr(0, shown.size()));
  }
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(shown, "Hi </x\xc3\xa9!");
  EXPECT_EQ(s.text(), "Hi </x\xc3\xa9!");
  EXPECT_TRUE(s.push("more").empty());
  EXPECT_TRUE(s.finish().empty());

  api::TextStream t({"\n\n"});
  std::string out(t.push("a\n"));
  EXPECT_EQ(out, "a");  // the newline may begin the stop
  out += t.push("b");
  out += t.finish();
  EXPECT_EQ(out, "a\nb");
  EXPECT_FALSE(t.stopped());

  api::TextStream u;  // no stops: only characters are held
  EXPECT_EQ(u.push("\xe2\x82"), "");
  EXPECT_EQ(u.push("\xac"), "\xe2\x82\xac");
  EXPECT_EQ(u.push("\xe2"), "");
  EXPECT_EQ(u.finish(), "\xe2");  // an unfinished character is given at the end as it is
}

TEST(Api, CallbackFalseCancels) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  GenerateOptions o;
  o.max_tokens = 50;
  o.ignore_eos = true;
  int calls = 0;
  auto r = std::move(Session::create(*m)).value()->generate(m->tokenize("Once upon a time"), *greedy(), o,
                                                             [&](std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->stop_reason, "cancelled");
  EXPECT_EQ(calls, 3);
  EXPECT_LT(r->generated_tokens, 50);
}

TEST(Api, AFullContextStopsGeneration) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = m->tokenize("Once upon a time");
  auto s = std::move(Session::create(*m, {.n_ctx = 16})).value();
  GenerateOptions o;
  o.max_tokens = 100;
  o.ignore_eos = true;
  auto r = s->generate(prompt, *greedy(), o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->stop_reason, "context");
  EXPECT_EQ(s->n_past(), 16);
  // A prompt as long as the context is refused with both numbers.
  std::vector<int32_t> long_prompt(16, prompt[1]);
  auto bad = s->generate(long_prompt, *greedy(), o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("16"), std::string::npos);
}

// Sessions decoded together take the tokens a lone session would, greedy.
TEST(Api, SessionsEvaluatedTogetherGenerateWhatEachDoesAlone) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::vector<std::vector<int32_t>> prompts = {m->tokenize("Once upon a time"), m->tokenize("The dog"),
                                                     m->tokenize("Lily and Tom went to the park")};
  std::vector<std::unique_ptr<Session>> owned;
  std::vector<Session*> sessions;
  for (size_t i = 0; i < prompts.size(); ++i) {
    owned.push_back(std::move(Session::create(*m, {.n_ctx = 128})).value());
    sessions.push_back(owned.back().get());
  }
  std::vector<std::span<const int32_t>> batch(prompts.begin(), prompts.end());
  std::vector<std::vector<int32_t>> out(prompts.size());
  for (int step = 0; step < 12; ++step) {
    ASSERT_TRUE(Session::eval_together(sessions, batch).is_ok());
    for (size_t i = 0; i < sessions.size(); ++i) out[i].push_back(argmax(sessions[i]->logits()));
    for (size_t i = 0; i < sessions.size(); ++i) batch[i] = std::span<const int32_t>(&out[i].back(), 1);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions o;
    o.max_tokens = 12;
    o.ignore_eos = true;
    auto alone = std::move(Session::create(*m, {.n_ctx = 128})).value()->generate(prompts[i], *greedy(), o);
    ASSERT_TRUE(alone.is_ok());
    std::string text;
    for (int32_t t : out[i]) text += m->piece(t);
    EXPECT_EQ(text, alone->text) << "sequence " << i;
    EXPECT_EQ(sessions[i]->tokens().size(), prompts[i].size() + 11);
  }
  Session* twice[] = {sessions[0], sessions[0]};
  const std::span<const int32_t> two[] = {batch[0], batch[0]};
  EXPECT_FALSE(Session::eval_together(twice, two).is_ok());
}

TEST(Api, BadArgumentsAreErrorsNotCrashes) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  SamplerOptions so;
  so.top_p = 1.5f;
  auto bad = Sampler::create(so);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("top_p"), std::string::npos);
  so = {};
  so.temperature = -1;
  EXPECT_FALSE(Sampler::create(so).is_ok());
  EXPECT_FALSE(Session::create(*m, {.n_ctx = -5}).is_ok());
  auto s = std::move(Session::create(*m, {.n_ctx = 64})).value();
  GenerateOptions o;
  EXPECT_FALSE(s->generate({}, *greedy(), o).is_ok());
  o.stop = {""};
  EXPECT_FALSE(s->generate(m->tokenize("Hi"), *greedy(), o).is_ok());
  const int32_t out_of_vocab[1] = {100000};
  EXPECT_FALSE(s->eval(out_of_vocab).is_ok());
}

TEST(Api, SavedSessionsContinueExactly) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  const std::vector<int32_t> prompt = m->tokenize("Once upon a time there was a girl named Lily");
  auto a = std::move(Session::create(*m, {.n_ctx = 128})).value();
  ASSERT_TRUE(a->eval(prompt).is_ok());
  const std::string path = temp_path("api-session.orkstate");
  ASSERT_TRUE(a->save(path).is_ok());
  GenerateOptions o;
  o.max_tokens = 16;
  o.ignore_eos = true;
  auto ra = a->generate(prompt, *greedy(), o);
  ASSERT_TRUE(ra.is_ok());

  auto b = std::move(Session::create(*m, {.n_ctx = 128})).value();
  ASSERT_TRUE(b->load(path).is_ok());
  EXPECT_EQ(b->tokens(), prompt);
  EXPECT_EQ(b->n_past(), static_cast<int>(prompt.size()));
  // The last prompt token is evaluated again, on the loaded cache.
  auto rb = b->generate(prompt, *greedy(), o);
  ASSERT_TRUE(rb.is_ok());
  EXPECT_EQ(rb->prompt_evaluated, 1);
  EXPECT_EQ(rb->text, ra->text);
}

TEST(Api, CorruptOrForeignSessionFilesAreRefused) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  auto a = std::move(Session::create(*m, {.n_ctx = 64})).value();
  ASSERT_TRUE(a->eval(m->tokenize("Once upon a time")).is_ok());
  const std::string path = temp_path("api-corrupt.orkstate");
  ASSERT_TRUE(a->save(path).is_ok());
  const auto size = std::filesystem::file_size(path);

  // Truncated: refused, naming the file; the session is left empty, not half loaded.
  const std::string cut = temp_path("api-truncated.orkstate");
  std::filesystem::copy_file(path, cut, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::resize_file(cut, size - 7);
  auto b = std::move(Session::create(*m, {.n_ctx = 64})).value();
  ASSERT_TRUE(b->eval(m->tokenize("A cat")).is_ok());
  const Status st = b->load(cut);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find(cut), std::string::npos);
  EXPECT_EQ(b->n_past(), 0);
  EXPECT_TRUE(b->tokens().empty());

  // Not a session file at all: refused before anything is touched.
  const std::string junk = temp_path("api-junk.orkstate");
  std::ofstream(junk) << "hello";
  ASSERT_TRUE(b->eval(m->tokenize("A cat")).is_ok());
  EXPECT_FALSE(b->load(junk).is_ok());
  EXPECT_EQ(b->tokens().size(), static_cast<size_t>(b->n_past()));
  EXPECT_GT(b->n_past(), 0);

  // Too long for a smaller context.
  auto tiny = std::move(Session::create(*m, {.n_ctx = 3})).value();
  EXPECT_FALSE(tiny->load(path).is_ok());
  EXPECT_FALSE(b->load("/nonexistent/state").is_ok());
}

TEST(Api, SessionFilesOfAnotherModelAreRefused) {
  ORK_REQUIRE_TESTDATA("models/tinystories656K-f32.gguf");
  auto m = load_model();
  auto other = load_model(::ork::testing::testdata("models/tinystories656K-f32.gguf"));
  ASSERT_NE(m, nullptr);
  ASSERT_NE(other, nullptr);
  auto a = std::move(Session::create(*m, {.n_ctx = 64})).value();
  ASSERT_TRUE(a->eval(m->tokenize("Once upon a time")).is_ok());
  const std::string path = temp_path("api-foreign.orkstate");
  ASSERT_TRUE(a->save(path).is_ok());
  auto b = std::move(Session::create(*other, {.n_ctx = 64})).value();
  const Status st = b->load(path);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.to_string().find("another model"), std::string::npos);
}

TEST(Api, ChatTemplateFallsBackToChatMLAndRendersTheModelsOwn) {
  auto m = load_model();
  ASSERT_NE(m, nullptr);
  EXPECT_FALSE(m->has_chat_template());
  auto p = m->apply_chat_template(R"([{"role":"user","content":"Hi"}])", true);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  EXPECT_EQ(*p, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_FALSE(m->apply_chat_template("{not json", true).is_ok());
  EXPECT_FALSE(m->apply_chat_template(R"({"role":"user"})", true).is_ok());
  ASSERT_TRUE(m->set_chat_template("{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}",
                                   "test").is_ok());
  auto q = m->apply_chat_template(R"([{"role":"user","content":"Hi"}])", false);
  ASSERT_TRUE(q.is_ok());
  EXPECT_EQ(*q, "<s>[user] Hi\n");
  EXPECT_FALSE(m->set_chat_template("{% for %}", "broken").is_ok());
}

// The C API: the same model through ork.h, its size conventions and errors.
TEST(CApi, TokenizeGenerateAndErrors) {
  ork_model* model = nullptr;
  ork_model_params mp = ork_model_default_params();
  ASSERT_EQ(ork_model_load(kModel.c_str(), &mp, &model), ORK_OK) << ork_last_error();
  EXPECT_EQ(ork_model_n_vocab(model), 512);

  ork_token few[2];
  const int32_t need = ork_tokenize(model, "Once upon a time", -1, few, 2, 1, 1);
  ASSERT_LT(need, -2);
  std::vector<ork_token> ids(static_cast<size_t>(-need));
  ASSERT_EQ(ork_tokenize(model, "Once upon a time", -1, ids.data(), -need, 1, 1), -need);
  char small[1];
  const int32_t piece_need = ork_token_to_piece(model, ids[1], small, 0, 0);
  EXPECT_LT(piece_need, 0);

  ork_session* session = nullptr;
  ork_session_params sp = ork_session_default_params();
  sp.n_ctx = 128;
  ASSERT_EQ(ork_session_create(model, &sp, &session), ORK_OK);
  EXPECT_EQ(ork_session_logits(session), nullptr);
  ork_sampler* sampler = nullptr;
  ork_sampler_params smp = ork_sampler_default_params();
  smp.temperature = 0;
  ASSERT_EQ(ork_sampler_create(&smp, &sampler), ORK_OK);
  ork_generate_params gp = ork_generate_default_params();
  gp.max_tokens = 10;
  gp.ignore_eos = 1;
  std::string text;
  ork_generate_result r;
  ASSERT_EQ(ork_generate(
                session, sampler, "Once upon a time", &gp,
                [](void* user, const char* t, size_t n) {
                  static_cast<std::string*>(user)->append(t, n);
                  return 1;
                },
                &text, &r),
            ORK_OK)
      << ork_last_error();
  EXPECT_EQ(r.generated_tokens, 10);
  EXPECT_STREQ(r.stop_reason, "length");
  EXPECT_FALSE(text.empty());

  const std::string path = temp_path("capi.orkstate");
  EXPECT_EQ(ork_session_save(session, path.c_str()), ORK_OK) << ork_last_error();
  EXPECT_EQ(ork_session_load(session, "/nonexistent/state"), ORK_IO);
  EXPECT_NE(std::string(ork_last_error()).find("/nonexistent/state"), std::string::npos);
  EXPECT_EQ(ork_session_load(session, path.c_str()), ORK_OK);

  // Errors are statuses with a message, never a crash.
  smp.top_p = 2;
  ork_sampler* bad = nullptr;
  EXPECT_EQ(ork_sampler_create(&smp, &bad), ORK_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  EXPECT_NE(std::string(ork_last_error()).find("top_p"), std::string::npos);
  ork_model* missing = nullptr;
  EXPECT_NE(ork_model_load("/nonexistent.gguf", &mp, &missing), ORK_OK);
  EXPECT_EQ(missing, nullptr);
  EXPECT_EQ(ork_generate(nullptr, sampler, "x", &gp, nullptr, nullptr, nullptr), ORK_INVALID_ARGUMENT);
  char* rendered = nullptr;
  EXPECT_EQ(ork_model_apply_chat_template(model, "[oops", 1, &rendered), ORK_INVALID_ARGUMENT);
  ASSERT_EQ(ork_model_apply_chat_template(model, R"([{"role":"user","content":"Hi"}])", 1, &rendered), ORK_OK);
  EXPECT_EQ(std::string(rendered), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ork_string_free(rendered);

  ork_sampler_free(sampler);
  ork_session_free(session);
  ork_model_free(model);
}

// The KV cache's types (llama.cpp's --cache-type-k/-v): q8_0 where the
// heads allow it, generating as f16 does; refused by name elsewhere.
TEST(Api, SessionCacheTypes) {
  auto tiny = load_model();  // heads of 8: no q8_0
  ASSERT_NE(tiny, nullptr);
  auto bad = Session::create(*tiny, {.n_ctx = 64, .cache_type_k = "q4_0"});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().to_string().find("cache_type_k \"q4_0\" is not a cache type (f16, q8_0)"), std::string::npos)
      << bad.status().to_string();
  auto narrow = Session::create(*tiny, {.n_ctx = 64, .cache_type_k = "q8_0", .cache_type_v = "q8_0"});
  ASSERT_FALSE(narrow.is_ok());
  EXPECT_NE(narrow.status().to_string().find("this model's heads are 8"), std::string::npos);

  ORK_REQUIRE_TESTDATA("models/sotu-moe-f32.gguf");
  ork_model* model = nullptr;
  ork_model_params mp = ork_model_default_params();
  ASSERT_EQ(ork_model_load(testing::testdata("models/sotu-moe-f32.gguf").c_str(), &mp, &model), ORK_OK);
  ork_session_params sp = ork_session_default_params();
  EXPECT_EQ(sp.cache_type_k, nullptr);  // f16
  sp.n_ctx = 128;
  sp.cache_type_k = "q8_0";
  sp.cache_type_v = "q8_0";
  ork_session* session = nullptr;
  ASSERT_EQ(ork_session_create(model, &sp, &session), ORK_OK) << ork_last_error();
  std::vector<ork_token> ids(64);
  const int32_t n = ork_tokenize(model, "The state of the union is", -1, ids.data(), 64, 1, 0);
  ASSERT_GT(n, 2);
  ASSERT_EQ(ork_session_eval(session, ids.data(), n), ORK_OK) << ork_last_error();
  const float* logits = ork_session_logits(session);
  ASSERT_NE(logits, nullptr);
  EXPECT_TRUE(std::isfinite(logits[0]));
  ork_session_free(session);
  sp.cache_type_k = "f16";  // q8_0 values need q8_0 keys
  EXPECT_EQ(ork_session_create(model, &sp, &session), ORK_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ork_last_error()).find("needs a q8_0 key cache"), std::string::npos) << ork_last_error();
  ork_model_free(model);
}

}  // namespace
}  // namespace ork::api
