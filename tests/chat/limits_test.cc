// Hostile templates: every resource limit must stop the render with a clear error instead of
// hanging, exhausting memory or overflowing the stack. Run under ASan/UBSan in CI.
#include <gtest/gtest.h>

#include <chrono>

#include "chat/pyops.h"
#include "test_util.h"

namespace kvforge::chat {
namespace {

using testing::RenderWith;

// Renders and expects a ResourceExhausted error whose message mentions `needle`.
void ExpectLimit(const std::string& source, const std::string& needle, const Limits& limits = {}) {
  SCOPED_TRACE(source);
  const auto start = std::chrono::steady_clock::now();
  const auto r = RenderWith(source, testing::kVarsJson, limits);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.ok) << "rendered " << r.text.size() << " bytes";
  EXPECT_EQ(r.code, StatusCode::kResourceExhausted) << r.text;
  EXPECT_NE(r.text.find(needle), std::string::npos) << r.text;
  EXPECT_LT(seconds, 30.0);  // generous: debug + sanitizer builds are slow
}

TEST(ChatLimits, NestedLoopsHitTheIterationLimit) {
  ExpectLimit(
      "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
      "{% endfor %}{% endfor %}{% endfor %}",
      "max_loop_iterations");
}

TEST(ChatLimits, IterationLimitIsConfigurable) {
  Limits limits;
  limits.max_loop_iterations = 10;
  ExpectLimit("{% for a in range(11) %}{% endfor %}", "max_loop_iterations (10)", limits);
  EXPECT_TRUE(RenderWith("{% for a in range(10) %}{% endfor %}", testing::kVarsJson, limits).ok);
}

TEST(ChatLimits, InfiniteMacroRecursionHitsTheCallDepth) {
  ExpectLimit("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "max_call_depth");
  ExpectLimit(
      "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
      "max_call_depth");
  ExpectLimit("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}", "max_call_depth");
}

TEST(ChatLimits, ExponentialRecursionHitsTheStepBudget) {
  // Each call makes two more: 2^40 calls if nothing stopped it. (The default budget stops this
  // in about 0.3 s in a release build; a smaller one keeps debug/sanitizer runs quick.)
  Limits limits;
  limits.max_steps = 1'000'000;
  ExpectLimit(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
      "{{ f(40) }}",
      "max_steps (1000000", limits);
}

TEST(ChatLimits, HugeOutputHitsTheOutputLimit) {
  ExpectLimit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "max_output_bytes");
  Limits small;
  small.max_output_bytes = 1000;
  ExpectLimit("{% for i in range(1001) %}x{% endfor %}", "max_output_bytes", small);
}

TEST(ChatLimits, StringAndListBombs) {
  ExpectLimit("{{ 'x' * 1000000000000 }}", "max_output_bytes");
  ExpectLimit(
      "{% set ns = namespace(s='x' * 1000000) %}{% for i in range(50) %}{% set ns.s = ns.s ~ ns.s "
      "%}"
      "{% endfor %}",
      "max_output_bytes");
  ExpectLimit("{{ [1] * 1000000000000 }}", "max_collection_size");
  ExpectLimit(
      "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}",
      "max_collection_size");
  ExpectLimit("{{ '%1000000000d' % 1 }}", "max_output_bytes");
  ExpectLimit("{{ '{:>1000000000}'.format(1) }}", "max_output_bytes");
  ExpectLimit("{{ 'x'|center(1000000000) }}", "max_output_bytes");
  ExpectLimit("{{ 'ab'.replace('', 'x' * 5000000) }}", "max_output_bytes");
  ExpectLimit("{{ 'a\nb'|indent(1000000000) }}", "max_output_bytes");
  ExpectLimit("{{ [1, 2]|tojson(indent=1000000000) }}", "max_output_bytes");
}

TEST(ChatLimits, StepBudgetBoundsWhileStyleLoops) {
  // Loops are bounded by range()'s sandbox limit; nested ones by the iteration/step budgets.
  Limits limits;
  limits.max_steps = 100000;
  ExpectLimit("{% for i in range(100000) %}{% set x = i * 2 %}{% endfor %}", "max_steps", limits);
  const auto r = RenderWith("{{ range(1000000)|length }}");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.text.find("MAX_RANGE"), std::string::npos) << r.text;
}

TEST(ChatLimits, SelfReferencingContainersDoNotHangOrLeak) {
  // Python prints [[...]] here; kvforge stops at a nesting limit. Either way: no hang, no crash.
  ExpectLimit("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}", "nesting depth");
  ExpectLimit("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}", "nesting depth");
  ExpectLimit(
      "{% set a = [] %}{% set _ = a.append(a) %}{% set b = [] %}{% set _ = b.append(b) %}"
      "{{ a == b }}",
      "nesting depth");
  // tojson of a cycle is Python's ValueError.
  const auto r = RenderWith("{% set d = {} %}{% set _ = d.update(me=d) %}{{ d|tojson }}");
  EXPECT_EQ(r.text, "ValueError: Circular reference detected");
  // Cycles that are never printed render fine and are broken when the render ends (LSan checks).
  EXPECT_TRUE(RenderWith("{% set a = [] %}{% set b = [a] %}{% set _ = a.append(b) %}ok").ok);
  EXPECT_TRUE(RenderWith("{% for i in range(3) %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}"
                         "{% endfor %}")
                  .ok);
}

TEST(ChatLimits, DeeplyNestedValuesAreDestroyedWithoutRecursion) {
  // 200k levels of [[[...]]] built at render time; freeing them must not overflow the stack.
  const auto r = RenderWith(
      "{% set ns = namespace(v=[]) %}{% for i in range(100) %}{% for j in range(2000) %}"
      "{% set ns.v = [ns.v] %}{% endfor %}{% endfor %}done");
  EXPECT_TRUE(r.ok) << r.text;
  EXPECT_EQ(r.text, "done");
}

TEST(ChatLimits, DeepValuesFromJsonAreRejectedOrHandled) {
  Value v = Value::List();
  for (int i = 0; i < 100000; ++i) v = Value::List({v});  // destroyed iteratively at scope end
  EXPECT_FALSE(ToJson(v).ok());
  EXPECT_THROW(Repr(v), std::exception);  // internal API throws; the public API never does
}

TEST(ChatLimits, RenderErrorsDoNotThrow) {
  for (const char* src :
       {"{{ 1 / 0 }}", "{{ x.y.z }}", "{{ raise_exception('x') }}", "{{ [1, 2]|batch(0)|list }}",
        "{{ '%z' % 1 }}", "{{ '{' .format() }}", "{{ 'abc'[::0] }}", "{{ 2 ** 100 }}",
        "{{ 9223372036854775807 + 1 }}", "{{ -(-9223372036854775807 - 1) }}",
        "{{ (-9223372036854775807 - 1) // -1 }}", "{{ '9' * 20|int }}",
        "{{ '99999999999999999999'|int }}", "{{ 1e400|int }}", "{{ (1e400)|round }}",
        "{{ '{0[99999999999999999999]}'.format([]) }}"}) {
    SCOPED_TRACE(src);
    const auto r = RenderWith(src);  // must return (ok or error), never throw or crash
    EXPECT_TRUE(r.ok || !r.text.empty());
  }
}

}  // namespace
}  // namespace kvforge::chat
