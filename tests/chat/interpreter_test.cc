// Expression and statement semantics (Python/Jinja2 parity), scoping, macros, loops, undefined
// values, runtime errors, and the public ChatTemplate API.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "test_util.h"

namespace kvforge::chat {
namespace {

using testing::CheckParity;
using testing::ParityCase;
using testing::Render;
using testing::RenderWith;

// Generated with Python Jinja2 3.1.6 (see test_util.h).
const ParityCase kCases[] =
    {
        {"arithmetic",
         R"~~({{ 10 / 4 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ 2 ** 10 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + 2.0 }} {{ true + true }})~~",
         R"~~(2.5 3 -4 2 -2 0.5 1024 3.0 0.5 3.0 2)~~", false},
        {"float_repr",
         R"~~({{ 1.0 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 1e-5 }} {{ 0.0001 }} {{ 0.1 + 0.2 }} {{ -0.0 }} {{ 1.5e300 * 1e10 }} {{ 2.0 ** 70 }} {{ 123456789.123 }})~~",
         R"~~(1.0 1e+20 1e+16 1000000000000000.0 1e-05 0.0001 0.30000000000000004 -0.0 inf 1.1805916207174113e+21 123456789.123)~~",
         false},
        {"containers_repr",
         R"~~({{ [1.5, 'a', "it's", none, true] }} {{ {'a': (1,), 'b': ()} }} {{ ['a"b', "x'y\"z", 'tab\there'] }} {{ {'k': {'n': [none]}} }} {{ (1, 'a') }})~~",
         R"~~([1.5, 'a', "it's", None, True] {'a': (1,), 'b': ()} ['a"b', 'x\'y"z', 'tab\there'] {'k': {'n': [None]}} (1, 'a'))~~",
         false},
        {"string_ops",
         R"~~({{ 'ab' + 'cd' }}{{ 'ab' * 3 }}{{ 3 * 'x' }}{{ 'a' ~ 1 ~ none ~ true ~ 1.5 }}{{ [1] + [2] }}{{ [0] * 3 }}{{ (1,) + (2,) }})~~",
         R"~~(abcdabababxxxa1NoneTrue1.5[1, 2][0, 0, 0](1, 2))~~", false},
        {"comparisons",
         R"~~({{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}{{ (1, 2) == (1, 2) }}{{ [1] == (1,) }}{{ {'a': 1} == {'a': 1} }}{{ none == none }}{{ 'a' != 'b' }}{{ 2 >= 2 }})~~",
         R"~~(TrueTrueTrueTrueFalseTrueTrueTrueTrue)~~", false},
        {"membership",
         R"~~({{ 'a' in 'cat' }}{{ 1 in [1, 2] }}{{ 'a' in {'a': 1} }}{{ 3 not in x_list }}{{ 'zz' in d }}{{ 'x' in undefined_var }})~~",
         R"~~(TrueTrueTrueFalseFalseFalse)~~", false},
        {"and_or_return_operands",
         R"~~([{{ 0 and 5 }}][{{ 3 and 5 }}][{{ '' or 'dflt' }}][{{ none_v or [] }}][{{ x_list or 1 }}][{{ not none_v }}])~~",
         R"~~([0][5][dflt][[]][[1, 2, 3]][True])~~", false},
        {"short_circuit",
         R"~~({{ false and undefined_var.attr }}{{ true or undefined_var.attr }}ok)~~",
         R"~~(FalseTrueok)~~", false},
        {"truthiness",
         R"~~({% for v in [0, 1, '', 'a', [], [0], {}, {'a': 1}, none, 0.0, 0.5] %}{{ 'T' if v else 'F' }}{% endfor %})~~",
         R"~~(FTFTFTFTFFT)~~", false},
        {"inline_if", R"~~({{ 1 if true else 2 }}{{ 1 if false else 2 }}[{{ 'a' if none_v }}])~~",
         R"~~(12[])~~", false},
        {"names_and_attrs",
         R"~~({{ messages[0]['content'] }}{{ messages[0].content }}{{ messages[-1].role|upper }}{{ messages|length }}{{ d.a }}{{ d['b'] }})~~",
         R"~~(syssysUSER21[1, 2])~~", false},
        {"attribute_prefers_methods",
         R"~~({% set m = {'items': 'key', 'x': 1} %}{{ m['items'] }}|{{ m.x }}|{{ m.get('x') }}|{{ m.items()|list }})~~",
         R"~~(key|1|1|[('items', 'key'), ('x', 1)])~~", false},
        {"missing_keys_are_undefined",
         R"~~([{{ d.zz }}][{{ d['zz'] }}][{{ x_list[10] }}][{{ s.nope }}][{{ none_v.attr }}][{{ n.real }}]{{ d.zz is defined }}{{ d.zz is undefined }})~~",
         R"~~([][][][][][5]FalseTrue)~~", false},
        {"undefined_prints_empty",
         R"~~([{{ nope }}][{{ nope|string }}][{{ nope ~ 'x' }}][{{ nope|length }}][{{ nope|list }}][{{ nope|join(',') }}][{{ nope|upper }}])~~",
         R"~~([][][x][0][[]][][])~~", false},
        {"undefined_iterates_empty",
         R"~~({% for x in nope %}x{% else %}empty{% endfor %}|{{ nope == other_nope }}|{{ nope is defined }})~~",
         R"~~(empty|True|False)~~", false},
        {"undefined_attribute_raises", R"~~({{ nope.attr }})~~",
         R"~~(UndefinedError: 'nope' is undefined)~~", true},
        {"undefined_missing_key_then_attribute", R"~~({{ d.zz.deeper }})~~",
         R"~~(UndefinedError: 'dict object' has no attribute 'zz')~~", true},
        {"undefined_list_element_then_attribute", R"~~({{ x_list[7].a }})~~",
         R"~~(UndefinedError: list object has no element 7)~~", true},
        {"undefined_call_raises", R"~~({{ nope() }})~~",
         R"~~(UndefinedError: 'nope' is undefined)~~", true},
        {"undefined_item_raises", R"~~({{ nope['x'] }})~~",
         R"~~(UndefinedError: 'nope' is undefined)~~", true},
        {"undefined_arithmetic_raises", R"~~({{ nope + 1 }})~~",
         R"~~(UndefinedError: 'nope' is undefined)~~", true},
        {"undefined_compare_raises", R"~~({{ nope < 1 }})~~",
         R"~~(UndefinedError: 'nope' is undefined)~~", true},
        {"undefined_tojson_raises", R"~~({{ nope|tojson }})~~",
         R"~~(TypeError: Object of type Undefined is not JSON serializable)~~", true},
        {"none_attribute_is_undefined", R"~~([{{ none_v.x }}]{{ none_v.x is defined }})~~",
         R"~~([]False)~~", false},
        {"type_error_add", R"~~({{ 'a' + 1 }})~~",
         R"~~(TypeError: can only concatenate str (not "int") to str)~~", true},
        {"type_error_add_int_str", R"~~({{ 1 + 'a' }})~~",
         R"~~(TypeError: unsupported operand type(s) for +: 'int' and 'str')~~", true},
        {"type_error_list_add", R"~~({{ [1] + 1 }})~~",
         R"~~(TypeError: can only concatenate list (not "int") to list)~~", true},
        {"type_error_neg", R"~~({{ -'a' }})~~",
         R"~~(TypeError: bad operand type for unary -: 'str')~~", true},
        {"type_error_mul", R"~~({{ 'a' * 2.0 }})~~",
         R"~~(TypeError: can't multiply sequence by non-int of type 'float')~~", true},
        {"type_error_order", R"~~({{ 1 < 'a' }})~~",
         R"~~(TypeError: '<' not supported between instances of 'int' and 'str')~~", true},
        {"type_error_order_none", R"~~({{ none_v < 1 }})~~",
         R"~~(TypeError: '<' not supported between instances of 'NoneType' and 'int')~~", true},
        {"type_error_in", R"~~({{ 1 in 'abc' }})~~",
         R"~~(TypeError: 'in <string>' requires string as left operand, not int)~~", true},
        {"zero_division", R"~~({{ 1 / 0 }})~~", R"~~(ZeroDivisionError: division by zero)~~", true},
        {"zero_floor_division", R"~~({{ 1 // 0 }})~~",
         R"~~(ZeroDivisionError: integer division or modulo by zero)~~", true},
        {"zero_float_division", R"~~({{ 1.0 / 0 }})~~",
         R"~~(ZeroDivisionError: float division by zero)~~", true},
        {"not_iterable", R"~~({% for x in none_v %}{% endfor %})~~",
         R"~~(TypeError: 'NoneType' object is not iterable)~~", true},
        {"not_iterable_int", R"~~({% for x in 5 %}{% endfor %})~~",
         R"~~(TypeError: 'int' object is not iterable)~~", true},
        {"not_callable", R"~~({{ s() }})~~", R"~~(TypeError: 'str' object is not callable)~~",
         true},
        {"unpack_too_many", R"~~({% for a, b in [(1, 2, 3)] %}{% endfor %})~~",
         R"~~(ValueError: too many values to unpack (expected 2))~~", true},
        {"unpack_ok",
         R"~~({% set a, b = 1, 2 %}{{ a }}{{ b }}{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for (a, b), c in [((1, 2), 3)] %}{{ a }}{{ b }}{{ c }}{% endfor %})~~",
         R"~~(12a=1;b=[1, 2];123)~~", false},
        {"raise_exception", R"~~({{ raise_exception('System role not supported') }})~~",
         R"~~(TemplateError: System role not supported)~~", true},
        {"raise_exception_concat", R"~~({{ raise_exception('bad role ' ~ messages[0].role) }})~~",
         R"~~(TemplateError: bad role system)~~", true},
        {"strftime_now",
         R"~~({{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %d %j %a %b %p %I %y %%') }}|{{ strftime_now('%d %b %Y') }})~~",
         R"~~(2026-01-15 12:00:00 Thursday January 15 015 Thu Jan PM 12 26 %|15 Jan 2026)~~",
         false},
        {"range_global",
         R"~~({{ range(5)|list }}{{ range(1, 5)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}{{ range(3)|length }})~~",
         R"~~([0, 1, 2, 3, 4][1, 2, 3, 4][5, 3, 1][]3)~~", false},
        {"range_too_big", R"~~({{ range(1000000)|length }})~~",
         R"~~(OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).)~~",
         true},
        {"dict_global",
         R"~~({{ dict(a=1, b=2) }}{{ dict({'a': 1}, b=2) }}{{ dict([('a', 1)]) }})~~",
         R"~~({'a': 1, 'b': 2}{'a': 1, 'b': 2}{'a': 1})~~", false},
        {"namespace_global",
         R"~~({% set ns = namespace(a=1, items=[]) %}{% set ns.a = ns.a + 1 %}{% for i in range(3) %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.a }}{{ ns.items }}{{ ns.missing }}|{{ ns }})~~",
         R"~~(2[0, 1, 2]|<Namespace {'a': 2, 'items': [0, 1, 2]}>)~~", false},
        {"namespace_from_dict",
         R"~~({% set ns = namespace({'x': 1}, y=2) %}{{ ns.x }}{{ ns.y }}{{ ns['x'] }})~~",
         R"~~(121)~~", false},
        {"set_attr_on_non_namespace", R"~~({% set d.x = 1 %})~~",
         R"~~(TemplateRuntimeError: cannot assign attribute on non-namespace object)~~", true},
        {"cycler_joiner",
         R"~~({% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{{ j() }}x{{ j() }}y{{ j() }})~~",
         R"~~(ababx|y|)~~", false},
        {"scope_for_loop",
         R"~~({% set x = 1 %}{% for i in range(2) %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }})~~",
         R"~~(12121)~~", false},
        {"scope_for_loop_no_leak",
         R"~~({% for i in range(2) %}{% if i == 1 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}][{{ i }}])~~",
         R"~~([][][])~~", false},
        {"scope_if_does_not_scope",
         R"~~({% set x = 5 %}{% if true %}{% set x = 6 %}{% endif %}{{ x }})~~", R"~~(6)~~", false},
        {"scope_macro",
         R"~~({% macro m() %}{{ x }}{% set x = 3 %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{{ x }})~~",
         R"~~(131)~~", false},
        {"scope_macro_late_binding",
         R"~~({% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% set x = 2 %}{{ m() }})~~",
         R"~~(12)~~", false},
        {"scope_set_block",
         R"~~({% set x = 1 %}{% set y %}{% set x = 2 %}{{ x }}{% endset %}{{ x }}{{ y }})~~",
         R"~~(12)~~", false},
        {"scope_with", R"~~({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}])~~",
         R"~~(3[])~~", false},
        {"scope_loop_shadowing",
         R"~~({% set items = [1, 2] %}{% for items in items %}{{ items }}{% endfor %}{{ items }})~~",
         R"~~(12[1, 2])~~", false},
        {"loop_variables",
         R"~~({% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}];{% endfor %})~~",
         R"~~(1032TrueFalse3[|b];2121FalseFalse3[a|c];3210FalseTrue3[b|];)~~", false},
        {"loop_cycle_changed_depth",
         R"~~({% for x in 'aab' %}{{ loop.cycle('o', 'e') }}{{ loop.changed(x) }}{{ loop.depth }}{% endfor %})~~",
         R"~~(oTrue1eFalse1oTrue1)~~", false},
        {"loop_filter_and_else",
         R"~~({% for x in [1, 2, 3] if x != 2 %}{{ loop.index }}/{{ loop.length }};{% else %}none{% endfor %}{% for a in [] %}x{% else %}empty{% endfor %})~~",
         R"~~(1/2;2/2;empty)~~", false},
        {"loop_over_dict_and_string",
         R"~~({% for k in {'b': 1, 'a': 2} %}{{ k }}{% endfor %}{% for c in uni %}[{{ c }}]{% endfor %})~~",
         R"~~(ba[h][é][l][l][o][ ][猫])~~", false},
        {"loop_nested_and_outer",
         R"~~({% for x in [1, 2] %}{% set outer = loop %}{% for y in [3, 4] %}{{ outer.index }}{{ loop.index }},{% endfor %}{% endfor %})~~",
         R"~~(11,12,21,22,)~~", false},
        {"loop_break_continue",
         R"~~({% for i in range(10) %}{% if i > 5 %}{% break %}{% endif %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %})~~",
         R"~~(024)~~", false},
        {"loop_recursive",
         R"~~({% for x in [[1, [2]], [3]] recursive %}<{{ x if x is number else loop(x) }}>{% endfor %})~~",
         R"~~(<<1><<2>>><<3>>)~~", false},
        {"loop_name_outside_loop", R"~~([{{ loop }}])~~", R"~~([])~~", false},
        {"macro_defaults_and_kwargs",
         R"~~({% macro m(a, b=a, c=[]) %}{{ a }}{{ b }}{{ c }};{% endmacro %}{{ m(1) }}{{ m(1, c=2) }}{{ m(b=3, a=4) }})~~",
         R"~~(11[];112;43[];)~~", false},
        {"macro_missing_argument",
         R"~~({% macro m(a) %}[{{ a }}]{{ a.x }}{% endmacro %}{{ m() }})~~",
         R"~~(UndefinedError: parameter 'a' was not provided)~~", true},
        {"macro_too_many_args", R"~~({% macro m(a) %}{% endmacro %}{{ m(1, 2) }})~~",
         R"~~(TypeError: macro 'm' takes not more than 1 argument(s))~~", true},
        {"macro_unknown_kwarg", R"~~({% macro m(a) %}{% endmacro %}{{ m(c=1) }})~~",
         R"~~(TypeError: macro 'm' takes no keyword argument 'c')~~", true},
        {"macro_varargs_kwargs",
         R"~~({% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }})~~",
         R"~~(1(2, 3){'k': 'v'})~~", false},
        {"macro_recursion",
         R"~~({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }})~~",
         R"~~(54321)~~", false},
        {"macro_as_value",
         R"~~({% macro m() %}body{% endmacro %}{% set f = m %}{{ f() }}{{ m.name }})~~",
         R"~~(bodym)~~", false},
        {"macro_call_block",
         R"~~({% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold{% endcall %})~~",
         R"~~(<b>bold</b>)~~", false},
        {"macro_call_block_args",
         R"~~({% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %})~~",
         R"~~([1][2])~~", false},
        {"macro_no_caller", R"~~({% macro m() %}{{ caller() }}{% endmacro %}{{ m() }})~~",
         R"~~(UndefinedError: No caller defined)~~", true},
        {"macro_caller_optional",
         R"~~({% macro m(a) %}[{{ a }}{{ caller(5) if caller }}]{% endmacro %}{% call(v) m(1) %}v={{ v }}{% endcall %}{{ m(2) }})~~",
         R"~~([1v=5][2])~~", false},
        {"macro_returns_string",
         R"~~({% macro m() %}  x  {% endmacro %}[{{ m()|trim }}]{{ m() is string }})~~",
         R"~~([x]True)~~", false},
        {"set_block_with_filter",
         R"~~({% set x %}  hello {{ 1 }} {% endset %}[{{ x }}]{% set y | upper | trim %} abc {% endset %}[{{ y }}])~~",
         R"~~([  hello 1 ][ABC])~~", false},
        {"filter_block",
         R"~~({% filter upper %}abc{{ 'd' }}{% endfilter %}{% filter replace('a', 'b') | title %}aaa a{% endfilter %})~~",
         R"~~(ABCDBbb B)~~", false},
        {"list_methods",
         R"~~({% set l = [] %}{% set _ = l.append(1) %}{% set _ = l.extend([2, 3]) %}{{ l }}{{ l.pop() }}{{ l.pop(0) }}{{ l }}{% set _ = l.insert(0, 9) %}{{ l }}{{ l.index(2) }}{{ l.count(9) }}{% set _ = l.reverse() %}{{ l }}{% set _ = l.sort() %}{{ l }}{{ l.copy() }})~~",
         R"~~([1, 2, 3]31[2][9, 2]11[2, 9][2, 9][2, 9])~~", false},
        {"dict_methods",
         R"~~({% set m = {} %}{% set _ = m.update({'a': 1}) %}{% set _ = m.update(b=2) %}{{ m }}{{ m.pop('a') }}{{ m }}{{ m.setdefault('c', 3) }}{{ m }}{{ m.get('zz', 'dflt') }}{{ m.get('zz') }}{{ m.keys()|list }}{{ m.values()|list }}{{ m.items()|list }})~~",
         R"~~({'a': 1, 'b': 2}1{'b': 2}3{'b': 2, 'c': 3}dfltNone['b', 'c'][2, 3][('b', 2), ('c', 3)])~~",
         false},
        {"aliasing",
         R"~~({% set a = {'x': 1} %}{% set b = a %}{% set _ = b.update({'y': 2}) %}{{ a }}{% set l = [] %}{% set ns = namespace(l=l) %}{% set _ = ns.l.append(1) %}{{ l }})~~",
         R"~~({'x': 1, 'y': 2}[1])~~", false},
        {"str_methods_case",
         R"~~({{ s.lower() }}|{{ s.upper() }}|{{ s.title() }}|{{ s.swapcase() }}|{{ 'hELLO wORLD'.capitalize() }}|{{ 'ab-cd ef_g1h'.title() }}|{{ uni.upper() }})~~",
         R"~~(hello world|HELLO WORLD|Hello World|hELLO wORLD|Hello world|Ab-Cd Ef_G1H|HÉLLO 猫)~~",
         false},
        {"str_methods_search",
         R"~~({{ s.startswith('Hell') }}{{ s.endswith(('x', 'ld')) }}{{ s.find('o') }}{{ s.rfind('o') }}{{ s.find('z') }}{{ s.count('l') }}{{ s.index('W') }}{{ uni.find('猫') }}{{ s.startswith('World', 6) }})~~",
         R"~~(TrueTrue47-1366True)~~", false},
        {"str_methods_index_missing", R"~~({{ s.index('z') }})~~",
         R"~~(ValueError: substring not found)~~", true},
        {"str_methods_split", R"~~({{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a,b,c'.split(',', 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ' a b c '.rsplit(None, 1) }}{{ ''.split() }}{{ ''.split(',') }}{{ 'a b'.split(maxsplit=0) }})~~",
         R"~~(['a', 'b', '', 'c']['a', 'b']['a', 'b,c']['a,b', 'c'][' a b', 'c'][]['']['a b'])~~",
         false},
        {"str_methods_strip",
         R"~~([{{ '  x  '.strip() }}][{{ '  x  '.lstrip() }}][{{ '  x  '.rstrip() }}][{{ 'abcxa'.strip('ax') }}][{{ '\n\t x \u3000'.strip() }}])~~",
         R"~~([x][x  ][  x][bc][x])~~", false},
        {"str_methods_misc",
         R"~~({{ s.replace('l', 'L', 1) }}|{{ 'a\nb\r\nc'.splitlines() }}|{{ 'a\nb\n'.splitlines(true) }}|{{ ','.join(['a', 'b']) }}|{{ '5'.zfill(3) }}|{{ 'ab'.ljust(4, '*') }}|{{ 'ab'.rjust(4) }}|{{ 'ab'.center(5) }}|{{ 'a=b=c'.partition('=') }}|{{ 'a=b=c'.rpartition('=') }}|{{ 'pre_x'.removeprefix('pre_') }}|{{ 'x.json'.removesuffix('.json') }})~~",
         R"~~(HeLlo World|['a', 'b', 'c']|['a\n', 'b\n']|a,b|005|ab**|  ab|  ab |('a', '=', 'b=c')|('a=b', '=', 'c')|x|x)~~",
         false},
        {"str_methods_predicates",
         R"~~({{ '12'.isdigit() }}{{ 'ab'.isalpha() }}{{ ' '.isspace() }}{{ 'AB'.isupper() }}{{ 'ab'.islower() }}{{ ''.isdigit() }}{{ 'a1'.isalnum() }})~~",
         R"~~(TrueTrueTrueTrueTrueFalseTrue)~~", false},
        {"str_join_type_error", R"~~({{ ','.join([1]) }})~~",
         R"~~(TypeError: sequence item 0: expected str instance, int found)~~", true},
        {"str_format_method",
         R"~~({{ '{}-{}'.format(1, 'a') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='x') }}|{{ '{a[0]}{b.x}'.format(a=[5], b={'x': 6}) }}|{{ '{:>{w}}'.format('z', w=4) }}|{{ '{{}}'.format() }})~~",
         R"~~(1-a|aba|x!|56|   z|{})~~", false},
        {"str_format_specs",
         R"~~({{ '{:d}|{:5d}|{:<5d}|{:^5d}|{:05d}|{:+d}'.format(0, 1, 2, 3, 4, 5) }}|{{ '{:x}|{:#x}|{:o}|{:b}|{:,}'.format(255, 255, 8, 5, 1234567) }}|{{ '{:.2f}|{:.3}|{:e}|{:%}|{:g}'.format(3.14159, 1.0, 12345.6789, 0.25, 1e-7) }}|{{ '{!r}|{:10}|{:10}|{:.2}|{:*<5}'.format('a', 'ab', 5, 'abc', 7) }}|{{ '{}'.format(none_v) }}{{ '{}'.format([1, 'a']) }})~~",
         R"~~(0|    1|2    |  3  |00004|+5|ff|0xff|10|101|1,234,567|3.14|1.0|1.234568e+04|25.000000%|1e-07|'a'|ab        |         5|ab|7****|None[1, 'a'])~~",
         false},
        {"percent_format",
         R"~~({{ "%s-%d-%5.2f-%r" % ("a", 3, 2.5, "x") }}|{{ "%s" % [1] }}|{{ "%5s|%-5s|%05d|%x|%.3e|%g|%%" % ("a", "b", 42, 255, 12345.678, 0.0001) }}|{{ "%(a)s-%(b)d" % {'a': 'x', 'b': 2} }}|{{ "%c%c" % (65, 'b') }}|{{ "%5.1f%%" % 99.44 }}|{{ "%-6d|" % -5 }}|{{ "%+.2e" % 0.000123 }}|{{ "%o %X %#o %#x" % (8, 255, 8, 255) }}|{{ '%.1f %.0f %.0f' % (2.25, 0.5, 1.5) }}|{{ '%s %s %r' % (1e16, 0.1, 0.1) }}|{{ '%d' % 3.9 }}|{{ '%x' % -255 }})~~",
         R"~~(a-3- 2.50-'x'|[1]|    a|b    |00042|ff|1.235e+04|0.0001|%|x-2|Ab| 99.4%|-5    ||+1.23e-04|10 FF 0o10 0xff|2.2 0 2|1e+16 0.1 0.1|3|-ff)~~",
         false},
        {"percent_format_too_few", R"~~({{ "%s %s" % ('a',) }})~~",
         R"~~(TypeError: not enough arguments for format string)~~", true},
        {"percent_format_too_many", R"~~({{ "%s" % ('a', 'b') }})~~",
         R"~~(TypeError: not all arguments converted during string formatting)~~", true},
        {"percent_format_bad_type", R"~~({{ "%d" % 'x' }})~~",
         R"~~(TypeError: %d format: a real number is required, not str)~~", true},
        {"markup_concat",
         R"~~({{ "x" | safe + "<a>" }}|{{ ("x" | safe) ~ "<a>" }}|{{ "<a>"|e }}|{{ "'" | escape }}|{{ '<'|e + '<'|e }}|{{ '&'|e|e }})~~",
         R"~~(x&lt;a&gt;|x<a>|&lt;a&gt;|&#39;|&lt;&lt;|&amp;)~~", false},
        {"generators_are_truthy",
         R"~~({% if x_list|select('gt', 10) %}truthy{% endif %}|{{ x_list|select('odd')|list }}|{{ (x_list|map('string')|list)|length }})~~",
         R"~~(truthy|[1, 3]|3)~~", false},
        {"generator_has_no_length", R"~~({{ x_list|select('odd')|length }})~~",
         R"~~(TypeError: object of type 'generator' has no len())~~", true},
        {"generator_not_json", R"~~({{ x_list|map('string')|tojson }})~~",
         R"~~(TypeError: Object of type generator is not JSON serializable)~~", true},
        {"generator_consumed_once",
         R"~~({% set g = x_list|map('string') %}{{ g|list }}{{ g|list }})~~",
         R"~~(['1', '2', '3'][])~~", false},
        {"tests_types",
         R"~~({{ x_list is sequence }}{{ d is mapping }}{{ s is string }}{{ n is number }}{{ f is float }}{{ n is integer }}{{ true is boolean }}{{ none_v is none }}{{ true is integer }}{{ true is number }}{{ d is sequence }}{{ s is iterable }}{{ n is iterable }}{{ nope is iterable }}{{ none_v is mapping }})~~",
         R"~~(TrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueFalseTrueFalse)~~", false},
        {"tests_values",
         R"~~({{ n is odd }}{{ n is even }}{{ 10 is divisibleby(5) }}{{ 10 is divisibleby 3 }}{{ 1 is sameas 1 }}{{ none_v is sameas none }}{{ 'a' is in 'abc' }}{{ 3 is eq 3 }}{{ 3 is equalto 3 }}{{ 3 is ne 4 }}{{ 3 is lt 4 }}{{ 3 is ge 3 }}{{ 3 is gt 4 }}{{ 3 is le 2 }}{{ 'A' is upper }}{{ 'a' is lower }}{{ 0 is false }}{{ false is false }}{{ true is true }})~~",
         R"~~(TrueFalseTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseFalseTrueTrueFalseTrueTrue)~~",
         false},
        {"tests_callable",
         R"~~({{ range is callable }}{{ n is callable }}{{ s.upper is callable }}{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ 'abc' is escaped }}{{ 'abc'|e is escaped }}{{ nope is defined }}{{ nope is undefined }})~~",
         R"~~(TrueFalseTrueTrueFalseTrueFalseTrueFalseTrue)~~", false},
        {"tests_not",
         R"~~({{ none_v is not none }}{{ x_list is not string }}{{ not x_list is string }}
)~~",
         R"~~(FalseTrueTrue)~~", false},
};

TEST(ChatInterpreter, PythonParity) {
  for (const ParityCase& c : kCases) CheckParity(c);
}

TEST(ChatInterpreter, InputsAreReadOnly) {
  // Hugging Face renders with a sandbox; kvforge additionally refuses to mutate the caller's
  // values so one ChatInputs can be shared by concurrent renders.
  const auto r = RenderWith("{% set _ = messages.append(1) %}");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.text.rfind("SecurityError: ", 0), 0u) << r.text;
  EXPECT_EQ(Render("{% set l = messages + [] %}{% set _ = l.append(1) %}{{ l|length }}"), "3");
  EXPECT_EQ(Render("{% set m = dict(d) %}{% set _ = m.update(z=1) %}{{ m|length }}{{ d|length }}"),
            "32");
}

TEST(ChatInterpreter, RaiseExceptionIsATemplateError) {
  const auto r = RenderWith("{{ raise_exception('nope') }}");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(r.text, "TemplateError: nope");
}

TEST(ChatTemplateApi, StandardVariables) {
  auto tmpl = ChatTemplate::Parse(
      "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools is defined }}|"
      "{{ messages|length }}|{{ enable_thinking }}|{{ strftime_now('%Y') }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  ChatInputs in;
  in.messages = ParseJson(R"([{"role": "user", "content": "x"}])").value();
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  in.add_generation_prompt = true;
  in.extra.emplace_back("enable_thinking", Value::Bool(false));
  in.now = MakeTime(2031, 7, 4, 0, 0, 0);
  EXPECT_EQ(tmpl->Render(in).value(), "<s>|</s>|True|False|1|False|2031");
  in.tools = ParseJson("[]").value();
  in.bos_token.reset();
  EXPECT_EQ(tmpl->Render(in).value(), "|</s>|True|True|1|False|2031");
}

TEST(ChatTemplateApi, ExplicitFieldsWinOverExtras) {
  auto tmpl = ChatTemplate::Parse("{{ bos_token }}{{ messages|length }}");
  ASSERT_TRUE(tmpl.ok());
  ChatInputs in;
  in.messages = ParseJson("[1, 2]").value();
  in.bos_token = "B";
  in.extra.emplace_back("bos_token", Value::Str("X"));
  in.extra.emplace_back("messages", Value::List());
  EXPECT_EQ(tmpl->Render(in).value(), "B2");
}

TEST(ChatTemplateApi, RenderManyTimesAndFromManyThreads) {
  auto tmpl = ChatTemplate::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content }}{% endfor %}#{{ ns.n }}");
  ASSERT_TRUE(tmpl.ok());
  ChatInputs in;
  in.messages =
      ParseJson(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])")
          .value();
  const std::string want = "<user>a<assistant>b#2";
  for (int i = 0; i < 100; ++i) ASSERT_EQ(tmpl->Render(in).value(), want);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto out = tmpl->Render(in);
        if (!out.ok() || *out != want) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(ChatTemplateApi, StrftimeNowUsesInjectedTime) {
  auto tmpl = ChatTemplate::Parse("{{ strftime_now('%d %B %Y %H:%M:%S %a') }}");
  ASSERT_TRUE(tmpl.ok());
  ChatInputs in;
  in.now = MakeTime(2026, 1, 15, 12, 0, 0);
  EXPECT_EQ(tmpl->Render(in).value(), "15 January 2026 12:00:00 Thu");
  in.now = MakeTime(2024, 2, 29, 23, 59, 58);
  EXPECT_EQ(tmpl->Render(in).value(), "29 February 2024 23:59:58 Thu");
  in.now.reset();  // current local time: just check it renders
  EXPECT_TRUE(tmpl->Render(in).ok());
}

TEST(ChatTemplateApi, ParseIsoTime) {
  auto t = ParseIsoTime("2026-01-15T12:00:00");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->tm_year, 126);
  EXPECT_EQ(t->tm_mon, 0);
  EXPECT_EQ(t->tm_mday, 15);
  EXPECT_EQ(t->tm_hour, 12);
  EXPECT_EQ(t->tm_wday, 4);  // Thursday
  EXPECT_EQ(t->tm_yday, 14);
  EXPECT_TRUE(ParseIsoTime("2026-01-15").ok());
  EXPECT_TRUE(ParseIsoTime("2026-01-15 08:30").ok());
  for (const char* bad : {"", "2026", "2026-13-01", "2026-02-30", "2026-01-15T25:00",
                          "2026-01-15T12:00:00Z", "15/01/2026"}) {
    EXPECT_FALSE(ParseIsoTime(bad).ok()) << bad;
  }
}

TEST(ChatTemplateApi, ErrorsCarryStatusCodes) {
  auto bad = ChatTemplate::Parse("{% if %}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("TemplateSyntaxError: ", 0), 0u);
  auto tmpl = ChatTemplate::Parse("{{ messages[0].content.upper() }}");
  ASSERT_TRUE(tmpl.ok());
  ChatInputs in;  // messages undefined
  auto out = tmpl->Render(in);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "UndefinedError: 'messages' is undefined");
}

}  // namespace
}  // namespace kvforge::chat
