// Chat templates against transformers' apply_chat_template: every case of
// ../shared/testdata/templates (real templates, fixed conversations) must
// render byte for byte, or fail where the reference fails - with the
// template's own message when it raised one.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "model/chat/chat_template.h"
#include "testdata.h"

namespace ork {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t t = line.find('\t', at);
    out.push_back(line.substr(at, t == std::string::npos ? std::string::npos : t - at));
    if (t == std::string::npos) return out;
    at = t + 1;
  }
}

// The reference's fixed time: 2026-01-15 00:00:00.
std::tm fixed_date() {
  std::tm t{};
  t.tm_year = 2026 - 1900;
  t.tm_mon = 0;
  t.tm_mday = 15;
  t.tm_wday = 4;  // a Thursday
  t.tm_yday = 14;
  return t;
}

TEST(ChatTemplate, EveryReferenceCaseRendersByteForByte) {
  ORK_REQUIRE_TESTDATA("templates/cases.tsv");
  const std::string dir = testing::testdata("templates");
  std::ifstream cases(dir + "/cases.tsv");
  std::string line;
  std::getline(cases, line);  // header
  int texts = 0, errors = 0, failures = 0;
  while (std::getline(cases, line)) {
    const std::vector<std::string> f = split_tabs(line);
    ASSERT_GE(f.size(), 9u) << line;
    const std::string& name = f[0];
    const std::string& conversation = f[2];
    SCOPED_TRACE(name + " / " + f[1]);
    auto tmpl = ChatTemplate::parse(read_file(dir + "/templates/" + name + ".jinja"), name);
    ASSERT_TRUE(tmpl.is_ok()) << tmpl.status().to_string();
    const auto conv = nlohmann::ordered_json::parse(read_file(dir + "/conversations/" + conversation + ".json"));
    ChatTemplate::Inputs in;
    in.messages = conv["messages"];
    if (conv.contains("tools")) in.tools = conv["tools"];
    in.add_generation_prompt = f[4] == "true";
    in.vars = nlohmann::ordered_json::parse(f[5]);
    in.now = fixed_date();
    auto out = tmpl->render(in);
    const std::string expected = read_file(dir + "/" + f[8]);
    if (f[6] == "text") {
      ++texts;
      if (!out.is_ok()) {
        ++failures;
        ADD_FAILURE() << "failed: " << out.status().to_string();
        continue;
      }
      if (*out != expected) {
        ++failures;
        size_t at = 0;
        while (at < out->size() && at < expected.size() && (*out)[at] == expected[at]) ++at;
        ADD_FAILURE() << "differs at byte " << at << "\n--- got:\n" << out->substr(at > 80 ? at - 80 : 0, 300)
                      << "\n--- expected:\n" << expected.substr(at > 80 ? at - 80 : 0, 300);
      }
    } else {
      ++errors;
      if (out.is_ok()) {
        ++failures;
        ADD_FAILURE() << "rendered, but the reference fails with: " << expected;
      } else if (f[7] == "raise_exception") {
        EXPECT_EQ(out.status().message(), expected);
      }
    }
  }
  std::printf("chat templates: %d texts and %d errors checked, %d wrong\n", texts, errors, failures);
  EXPECT_EQ(texts + errors, 215);
}

TEST(ChatTemplate, ChatMLFallbackAndClearErrors) {
  ChatTemplate::Inputs in;
  in.messages = nlohmann::ordered_json::parse(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  auto out = ChatTemplate::chatml().render(in);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(*out, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // What cannot be parsed names the template and the line.
  auto bad = ChatTemplate::parse("line one\n{% for x in y %}\n{{ x }\n", "broken");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("chat template broken: line 3:"), std::string::npos) << bad.status().message();
  auto unknown = ChatTemplate::parse("{% frobnicate %}", "odd");
  EXPECT_NE(unknown.status().message().find("line 1: unknown or unsupported tag 'frobnicate'"), std::string::npos)
      << unknown.status().message();
  // A runtime failure names the line too.
  auto t = ChatTemplate::parse("a\nb\n{{ messages[0].content + 3 }}", "adds");
  ASSERT_TRUE(t.is_ok());
  auto r = t->render(in);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("chat template adds: line 3: can only concatenate str (not \"int\") to str"),
            std::string::npos)
      << r.status().message();
}

// Jinja semantics beyond what the fixtures use: filters, tests, slicing,
// loop variables, scoping, whitespace control.
TEST(ChatTemplate, JinjaSemantics) {
  auto run = [](const std::string& src, const std::string& vars = "{}") {
    auto t = ChatTemplate::parse(src, "t");
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    ChatTemplate::Inputs in;
    in.vars = nlohmann::ordered_json::parse(vars);
    auto r = t->render(in);
    return r.is_ok() ? *r : "ERROR: " + r.status().message();
  };
  EXPECT_EQ(run("{{ [3, 1, 2] | sort | join(',') }}"), "1,2,3");
  EXPECT_EQ(run("{{ 'abcdef'[1:4] }}|{{ 'abcdef'[::-1] }}|{{ [1,2,3,4][-2:] }}"), "bcd|fedcba|[3, 4]");
  EXPECT_EQ(run("{% for x in 'abc' %}{{ loop.index }}{{ x }}{{ '|' if not loop.last }}{% endfor %}"), "1a|2b|3c");
  // The loop object is built only for bodies that name it; nesting keeps each loop's own.
  EXPECT_EQ(run("{% for a in [1, 2] %}{% for b in [3, 4] %}{{ b }}{% endfor %}{{ loop.index }}{% endfor %}"), "341342");
  EXPECT_EQ(run("{% for a in 'xy' %}{% for b in 'pq' %}{{ loop.index }}{% endfor %}{{ a }}{% endfor %}"), "12x12y");
  EXPECT_EQ(run("{% for a in 'xy' %}{{ loop.first }}{% for b in 'p' %}{{ loop.length }}{% endfor %}{% endfor %}"), "True1False1");
  EXPECT_EQ(run("{% set x = 1 %}{% for i in range(3) %}{% set x = i %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(run("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"), "4");
  // A namespace that holds itself (directly, or through a dict a bound
  // method keeps) renders, and is freed when the render ends: the
  // sanitizer suite's leak check fails this test if the cycle survives
  // (the fuzzer found it: tests/fuzz/chat_template_corpus/namespace-cycle).
  EXPECT_EQ(run("{% set ns = namespace(x=1, y=2) %}{% set ns.x = ns %}{{ ns.x.x.y }}"), "2");
  EXPECT_EQ(run("{% set ns = namespace(f=0) %}{% set d = {'n': ns} %}{% set ns.f = d.items %}{{ ns.f() | length }}"),
            "1");
  EXPECT_EQ(run("{{ 7 // 2 }} {{ 7 / 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 1.0 }} {{ 1e20 }}"),
            "3 3.5 -4 1 1024 1.0 1e+20");
  EXPECT_EQ(run("{{ {'a': 1, 'b': [True, None]} }} {{ {'a': 1} | tojson }} {{ \"it's\" | tojson }}"),
            "{'a': 1, 'b': [True, None]} {\"a\": 1} \"it's\"");
  EXPECT_EQ(run("  {%- if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(run("{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}"), "[1B][23]");
  EXPECT_EQ(run("{{ x is defined }} {{ x | default('d') }} {{ none is none }} {{ 3 is divisibleby 3 }}"),
            "False d True True");
  EXPECT_EQ(run("{{ '  a b  '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'Hello'.startswith(('x', 'He')) }}"),
            "a b|['a', 'b', '', 'c']|True");
  EXPECT_EQ(run("{{ [{'n': 'b'}, {'n': 'a'}] | map(attribute='n') | list }} {{ [1, 2, 3] | select('odd') | list }}"),
            "['b', 'a'] [1, 3]");
  EXPECT_EQ(run("{% for k, v in {'x': 1, 'y': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "x=1;y=2;");
  EXPECT_EQ(run("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"), "012");
  EXPECT_EQ(run("{{ 'x' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ 'b' in 'abc' }} {{ 2 in [1, 2] }}"), "x1None ababab True True");
  EXPECT_EQ(run("{% raw %}{{ not parsed }}{% endraw %}"), "{{ not parsed }}");
  EXPECT_EQ(run("{{ \"line\\nnext\" | indent(2) }}"), "line\n  next");
  EXPECT_EQ(run("{{ [1, 2].append }}"), "ERROR: chat template t: line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(run("{{ raise_exception('stop here') }}"), "ERROR: stop here");
  EXPECT_EQ(run("{{ missing.attr }}"), "ERROR: chat template t: line 1: 'missing' is undefined");
}

}  // namespace
}  // namespace ork
