// Lexer and parser: whitespace control, literals, operator precedence and syntax errors, checked
// against Python Jinja2 (parity cases) plus direct token/AST-level checks.
#include <gtest/gtest.h>

#include "chat/errors.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "test_util.h"

namespace kvforge::chat {
namespace {

using testing::CheckParity;
using testing::ParityCase;
using testing::Render;
using testing::RenderWith;

// Generated with Python Jinja2 3.1.6 (see test_util.h).
const ParityCase kCases[] = {
    {"trim_blocks", R"~~({% if true %}
x
{% endif %}
y)~~",
     R"~~(x
y)~~",
     false},
    {"lstrip_blocks", R"~~(a
    {% if true %}
    b
    {% endif %}
c)~~",
     R"~~(a
    b
c)~~",
     false},
    {"lstrip_not_for_vars", R"~~(a
    {{ 'v' }}
c)~~",
     R"~~(a
    v
c)~~",
     false},
    {"minus_both_sides", R"~~(a  
  {%- if true -%}  
  b  
  {%- endif -%}
  c)~~",
     R"~~(abc)~~", false},
    {"minus_on_vars", R"~~(a   {{- 'b' -}}   c)~~", R"~~(abc)~~", false},
    {"plus_disables_lstrip", R"~~(a
    {%+ if true %}b{% endif %})~~",
     R"~~(a
    b)~~",
     false},
    {"plus_disables_trim", R"~~({% if true +%}
b{% endif %})~~",
     R"~~(
b)~~",
     false},
    {"comment_trim_and_lstrip", R"~~(a
   {# note #}
b)~~",
     R"~~(a
b)~~",
     false},
    {"comment_minus", R"~~(a  {#- note -#}  b)~~", R"~~(ab)~~", false},
    {"raw_block", R"~~({% raw %}{{ not }} {% evaluated %}{% endraw %})~~",
     R"~~({{ not }} {% evaluated %})~~", false},
    {"raw_block_ws", R"~~(x
  {%- raw -%}  y  {%- endraw -%}  
z)~~",
     R"~~(xyz)~~", false},
    {"raw_keeps_newline_after_begin", R"~~({% raw %}
a
{% endraw %}
b)~~",
     R"~~(
a
b)~~",
     false},
    {"trailing_newline_dropped", R"~~(abc
)~~",
     R"~~(abc)~~", false},
    {"only_one_trailing_newline_dropped", R"~~(abc

)~~",
     R"~~(abc
)~~",
     false},
    {"crlf_normalized", R"~~(a
b)~~",
     R"~~(a
b)~~",
     false},
    {"lstrip_at_template_start", R"~~(	  {% if true %}x{% endif %})~~", R"~~(x)~~", false},
    {"lstrip_after_text_same_line", R"~~(text {% if true %}x{% endif %})~~", R"~~(text x)~~",
     false},
    {"for_loop_layout", R"~~({% for i in range(3) %}
  - {{ i }}
{% endfor %})~~",
     R"~~(  - 0
  - 1
  - 2
)~~",
     false},
    {"for_loop_minus", R"~~([{% for i in range(3) -%}
  {{ i }}
{%- endfor %}])~~",
     R"~~([012])~~", false},
    {"string_escapes", R"~~({{ "a\tb\x41\u00e9\d\'" }}|{{ 'it''s' }}|{{ "q\"q" }})~~",
     R"~~(a	bAé\d'|its|q"q)~~", false},
    {"adjacent_strings", R"~~({{ 'x' 'y' "z" }})~~", R"~~(xyz)~~", false},
    {"number_literals",
     R"~~({{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 1e3 }} {{ 2E-2 }} {{ 0.5 }})~~",
     R"~~(1000 31 15 5 1500.0 1000.0 0.02 0.5)~~", false},
    {"braces_in_expressions", R"~~({{ {'a': {'b': 1}} }}{{ {'c': 2}['c'] }})~~",
     R"~~({'a': {'b': 1}}2)~~", false},
    {"tag_like_text", R"~~({{ '{{ x }}' }}{{ "{%" }} { } {x})~~", R"~~({{ x }}{% { } {x})~~",
     false},
    {"precedence",
     R"~~({{ 1 + 2 * 3 - 4 / 2 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 'a' ~ 1 + 2 }} {{ 2 * 3 ~ 4 }} {{ not 1 in [1] }} {{ -x_list|length }})~~",
     R"~~(TypeError: can only concatenate str (not "int") to str)~~", true},
    {"filter_binds_tighter",
     R"~~({{ 'ab' ~ 'cd'|upper }}{{ -3|abs }}{{ (-3)|abs }}{{ x_list|length + 1 }})~~",
     R"~~(abCD334)~~", false},
    {"test_without_parens",
     R"~~({{ 10 is divisibleby 5 }}{{ none is sameas none }}{{ 2 is in x_list }}{{ 1 if x_list is defined else 0 }})~~",
     R"~~(TrueTrueTrue1)~~", false},
    {"tuple_output", R"~~({{ 1, 2 }}|{{ (1,) }}|{{ () }})~~", R"~~((1, 2)|(1,)|())~~", false},
    {"print_statement", R"~~({% print 'a' %}{% print 1, 2 %})~~", R"~~(a12)~~", false},
    {"chained_comparison", R"~~({{ 1 < 2 < 3 }}{{ 1 < 3 < 2 }}{{ 1 == 1.0 == true }})~~",
     R"~~(TrueFalseTrue)~~", false},
    {"inline_if_without_else", R"~~([{{ 'x' if false }}])~~", R"~~([])~~", false},
    {"nested_inline_if", R"~~({{ 'a' if false else 'b' if false else 'c' }})~~", R"~~(c)~~", false},
    {"subscript_forms",
     R"~~({{ x_list.0 }}{{ x_list[-1] }}{{ d['b'][1] }}{{ d.b.0 }}{{ 'abc'[1:] }}{{ 'abcdef'[::2] }}{{ 'abc'[::-1] }})~~",
     R"~~(1321bcacecba)~~", false},
    {"call_forms",
     R"~~({{ dict(a=1, **{'b': 2}) }}{{ 'a{}c'.format(*['b']) }}{{ range(3,)|list }})~~",
     R"~~({'a': 1, 'b': 2}abc[0, 1, 2])~~", false},
    {"unknown_tag", R"~~({% frobnicate %})~~",
     R"~~(TemplateSyntaxError: Encountered unknown tag 'frobnicate'.)~~", true},
    {"unclosed_if", R"~~({% if true %}x)~~",
     R"~~(TemplateSyntaxError: Unexpected end of template. Jinja was looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that needs to be closed is 'if'.)~~",
     true},
    {"unclosed_for_in_if", R"~~({% if true %}{% for x in y %}{% endif %})~~",
     R"~~(TemplateSyntaxError: Encountered unknown tag 'endif'. You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for 'endfor' or 'else'. The innermost block that needs to be closed is 'for'.)~~",
     true},
    {"break_outside_loop", R"~~({% break %})~~",
     R"~~(SyntaxError: 'break' outside loop (<template>, line 11))~~", true},
    {"unknown_filter", R"~~({{ x | nosuchfilter }})~~",
     R"~~(TemplateAssertionError: No filter named 'nosuchfilter'.)~~", true},
    {"unknown_test", R"~~({{ x is nosuchtest }})~~",
     R"~~(TemplateAssertionError: No test named 'nosuchtest'.)~~", true},
    {"unknown_filter_in_if_is_runtime", R"~~({% if false %}{{ x | nosuchfilter }}{% endif %}ok)~~",
     R"~~(ok)~~", false},
    {"unknown_filter_in_if_taken", R"~~({% if true %}{{ x | nosuchfilter }}{% endif %}ok)~~",
     R"~~(TemplateRuntimeError: No filter named 'nosuchfilter' found.)~~", true},
    {"unterminated_string", R"~~({{ 'abc }})~~",
     R"~~(TemplateSyntaxError: unexpected char "'" at 3)~~", true},
    {"unterminated_comment", R"~~(a {# b)~~",
     R"~~(TemplateSyntaxError: Missing end of comment tag)~~", true},
    {"unbalanced_paren", R"~~({{ (1 + 2 }})~~",
     R"~~(TemplateSyntaxError: unexpected '}', expected ')')~~", true},
    {"missing_expression", R"~~({{ }})~~",
     R"~~(TemplateSyntaxError: Expected an expression, got 'end of print statement')~~", true},
    {"bad_token", R"~~({{ 1 $ 2 }})~~", R"~~(TemplateSyntaxError: unexpected char '$' at 5)~~",
     true},
    {"assign_to_const", R"~~({% set true = 1 %})~~",
     R"~~(TemplateSyntaxError: can't assign to 'const')~~", true},
    {"macro_default_order", R"~~({% macro m(a=1, b) %}{% endmacro %}
)~~",
     R"~~(TemplateSyntaxError: non-default argument follows default argument)~~", true},
};

TEST(ChatLexerParser, PythonParity) {
  for (const ParityCase& c : kCases) CheckParity(c);
}

TEST(ChatLexer, TokensOfASimpleTemplate) {
  const std::vector<Token> tokens = Lex("a{{ x.y|f(1, 'b') }}{% if z %}c{% endif %}");
  std::vector<std::string> seen;
  for (const Token& t : tokens) {
    switch (t.type) {
      case Tok::kText:
        seen.push_back("text:" + t.value);
        break;
      case Tok::kName:
        seen.push_back("name:" + t.value);
        break;
      case Tok::kOp:
        seen.push_back(t.value);
        break;
      case Tok::kInt:
        seen.push_back("int:" + std::to_string(t.int_value));
        break;
      case Tok::kString:
        seen.push_back("str:" + t.value);
        break;
      default:
        seen.push_back(DescribeToken(t));
    }
  }
  const std::vector<std::string> want = {"text:a",
                                         "begin of print statement",
                                         "name:x",
                                         ".",
                                         "name:y",
                                         "|",
                                         "name:f",
                                         "(",
                                         "int:1",
                                         ",",
                                         "str:b",
                                         ")",
                                         "end of print statement",
                                         "begin of statement block",
                                         "name:if",
                                         "name:z",
                                         "end of statement block",
                                         "text:c",
                                         "begin of statement block",
                                         "name:endif",
                                         "end of statement block",
                                         "end of template"};
  EXPECT_EQ(seen, want);
}

TEST(ChatLexer, NewlinesAreNormalisedAndOneTrailingNewlineDropped) {
  EXPECT_EQ(Render("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(Render("a\r\n\r\n"), "a\n");
  EXPECT_EQ(Render("{% if true %}\r\nx{% endif %}"), "x");  // trim_blocks sees "\n"
  EXPECT_EQ(Render("{{ 'a\r\nb' }}"), "a\nb");
}

TEST(ChatLexer, LineNumbersInSyntaxErrors) {
  const auto r = RenderWith("line1\n{% if x %}\nline3\n{{ 1 + }}\n{% endif %}");
  EXPECT_TRUE(r.parse_error);
  EXPECT_NE(r.text.find("(line 4)"), std::string::npos) << r.text;
  const auto r2 = RenderWith("a\n\n{% for x in y %}\n{% endif %}");
  EXPECT_TRUE(r2.parse_error);
  EXPECT_NE(r2.text.find("Encountered unknown tag 'endif'"), std::string::npos) << r2.text;
  EXPECT_NE(r2.text.find("'endfor' or 'else'"), std::string::npos) << r2.text;
  EXPECT_NE(r2.text.find("(line 4)"), std::string::npos) << r2.text;
}

TEST(ChatLexer, StringLiteralEscapes) {
  EXPECT_EQ(Render(R"({{ '\U0001F431\x41\101\N' }})"),
            "\xF0\x9F\x90\xB1"
            "AA\\N");
  EXPECT_EQ(Render("{{ 'multi\nline' }}"), "multi\nline");
  EXPECT_TRUE(RenderWith(R"({{ '\x4' }})").parse_error);
}

TEST(ChatParser, GenerationTagRendersItsBody) {
  // Hugging Face's {% generation %} marks assistant text for masks; it renders its body.
  EXPECT_EQ(Render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(ChatParser, UnsupportedTagsAreClearErrors) {
  for (const char* src : {"{% include 'x' %}", "{% extends 'x' %}", "{% import 'x' as y %}",
                          "{% block b %}{% endblock %}", "{% do x %}"}) {
    const auto r = RenderWith(src);
    EXPECT_TRUE(r.parse_error) << src;
    EXPECT_EQ(r.text.rfind("TemplateSyntaxError: ", 0), 0u) << r.text;
  }
}

TEST(ChatParser, BreakAndContinueOnlyInsideLoops) {
  EXPECT_TRUE(RenderWith("{% continue %}").parse_error);
  EXPECT_TRUE(RenderWith("{% for x in y %}{% macro m() %}{% break %}{% endmacro %}{% endfor %}")
                  .parse_error);
  EXPECT_FALSE(
      RenderWith("{% for x in [1] %}{% if true %}{% break %}{% endif %}{% endfor %}").parse_error);
}

TEST(ChatParser, UnknownFilterInsideIfFailsOnlyWhenEvaluated) {
  EXPECT_EQ(Render("{% if false %}{{ x|from_json }}{% endif %}ok"), "ok");
  EXPECT_EQ(Render("{{ 1 if true else (x|from_json) }}"), "1");
  EXPECT_EQ(Render("{% if true %}{{ x|from_json }}{% endif %}"),
            "ERROR: TemplateRuntimeError: No filter named 'from_json' found.");
  // A for loop inside an if is not "soft" in Jinja2: the error is raised at parse time.
  EXPECT_TRUE(RenderWith("{% if false %}{% for x in y %}{{ x|from_json }}{% endfor %}{% endif %}")
                  .parse_error);
}

TEST(ChatParser, NestingLimitIsEnforced) {
  std::string deep(300, '(');
  deep = "{{ " + deep + "1" + std::string(300, ')') + " }}";
  const auto r = RenderWith(deep);
  EXPECT_TRUE(r.parse_error);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted) << r.text;
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  for (int i = 0; i < 300; ++i) blocks += "{% endif %}";
  EXPECT_EQ(RenderWith(blocks).code, StatusCode::kResourceExhausted);
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  chain += " }}";
  EXPECT_EQ(RenderWith(chain).code, StatusCode::kResourceExhausted);
  // Moderate nesting is fine.
  EXPECT_EQ(Render("{{ ((((((1 + 2)))))) }}{{ [[[[1]]]] }}"), "3[[[[1]]]]");
}

TEST(ChatParser, TemplateSizeLimit) {
  Limits limits;
  limits.max_template_bytes = 100;
  const auto r = RenderWith(std::string(101, 'a'), testing::kVarsJson, limits);
  EXPECT_TRUE(r.parse_error);
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted);
  EXPECT_NE(r.text.find("max_template_bytes"), std::string::npos);
}

}  // namespace
}  // namespace kvforge::chat
