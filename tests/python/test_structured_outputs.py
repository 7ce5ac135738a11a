"""Structured outputs through the Python API: for 100 seeds and 20 schemas every JSON output
parses and validates with an independent validator (python3-jsonschema); regex, choice and GBNF
outputs match; logit_bias; bad constraints raise ValueError naming the problem."""
import json
import re

import jsonschema
import pytest

from kvforge import SamplingParams, StructuredOutputsParams

SHORT = {"type": "string", "maxLength": 8}
SCHEMAS = [
    {"type": "object", "properties": {"name": SHORT, "age": {"type": "integer"}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "null"}}},
    {"type": "array", "items": {"type": "integer", "minimum": -5, "maximum": 5}, "maxItems": 4},
    {"enum": ["red", "green", 3, None, {"a": 1}]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": SHORT, "minItems": 1,
                                                "maxItems": 3}}, "required": ["tags"]},
    {"$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"},
                                                       "y": {"type": "integer"}},
                      "required": ["x", "y"]}},
     "type": "array", "items": {"$ref": "#/$defs/pt"}, "maxItems": 2},
    {"anyOf": [{"type": "integer", "minimum": 10, "maximum": 20}, SHORT]},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "pattern": "^[A-Z][a-z]{1,5}( [0-9]{2})?$"},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                      "when": {"type": "string", "format": "time"}},
     "required": ["id"]},
    {"type": "number", "minimum": 0},
    {"type": "object", "properties": {"inner": {"type": "object", "properties": {
        "deep": {"type": "object", "properties": {"v": {"const": 42}}, "required": ["v"]}},
        "required": ["deep"]}}, "required": ["inner"]},
    {"type": "array", "prefixItems": [{"type": "string", "maxLength": 3}, {"type": "boolean"}],
     "items": False},
    {"type": ["integer", "null"], "maximum": -100},
    {"type": "object", "properties": {"k": {"type": "integer", "minimum": 0, "maximum": 9}},
     "additionalProperties": False},
    {"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"enum": ["x", "y"]}}, "required": ["b"]}]},
    {"type": "object", "properties": {"p": {"type": "string", "minLength": 2, "maxLength": 4},
                                      "q": {"oneOf": [{"type": "boolean"}, {"type": "null"}]}},
     "required": ["p", "q"], "additionalProperties": False},
    {"type": "array", "items": {"type": "array", "items": {"type": "integer", "minimum": 0,
                                                            "maximum": 3}, "maxItems": 2},
     "minItems": 1, "maxItems": 2},
]


def sampled(seed, **kw):
    return SamplingParams(temperature=1.0, seed=seed, max_tokens=160, **kw)


@pytest.mark.parametrize("index", range(len(SCHEMAS)))
def test_json_schema_outputs_validate(llm, index):
    schema = SCHEMAS[index]
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    so = StructuredOutputsParams(json=schema)
    outs = llm.generate(["Once upon a time"] * 100,
                        [sampled(seed, structured_outputs=so) for seed in range(100)])
    complete = 0
    for seed, out in enumerate(outs):
        c = out.outputs[0]
        if c.finish_reason != "stop":
            continue  # cut by max_tokens
        complete += 1
        value = json.loads(c.text)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, f"schema {index} seed {seed}: {c.text!r}: {errors}"
    assert complete >= 20, f"schema {index}: only {complete} of 100 outputs completed"


def test_regex_choice_and_grammar_outputs_match(llm):
    pattern = r"(Tom|Lily) (is|was) [a-z]{2,8}\."
    outs = llm.generate(["One day"] * 20,
                        [sampled(s, structured_outputs=StructuredOutputsParams(regex=pattern))
                         for s in range(20)])
    for o in outs:
        assert re.fullmatch(pattern, o.outputs[0].text), o.outputs[0].text
    choices = ["yes", "no", "maybe later"]
    outs = llm.generate(["Is it?"] * 10, [sampled(s, structured_outputs=StructuredOutputsParams(
        choice=choices)) for s in range(10)])
    assert all(o.outputs[0].text in choices for o in outs)
    gbnf = 'root ::= "The " animal " " verb "."\nanimal ::= "cat" | "dog"\nverb ::= [a-z]{3,6}\n'
    outs = llm.generate(["x"] * 10, [sampled(s, structured_outputs=StructuredOutputsParams(
        grammar=gbnf)) for s in range(10)])
    for o in outs:
        assert re.fullmatch(r"The (cat|dog) [a-z]{3,6}\.", o.outputs[0].text), o.outputs[0].text
    obj = llm.generate(["x"], sampled(1, structured_outputs=StructuredOutputsParams(
        json_object=True)))[0].outputs[0]
    if obj.finish_reason == "stop":
        assert isinstance(json.loads(obj.text), dict)


def test_logit_bias(llm):
    plain = llm.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=16))
    first = plain[0].outputs[0].token_ids[0]
    banned = llm.generate(["Once upon a time"], SamplingParams(temperature=0, max_tokens=16,
                                                               logit_bias={first: -100}))
    assert first not in banned[0].outputs[0].token_ids
    with pytest.raises(ValueError, match="logit_bias"):
        llm.generate(["x"], SamplingParams(max_tokens=4, logit_bias={1: 150}))


def test_bad_constraints_raise(llm):
    with pytest.raises(ValueError, match="multipleOf"):
        llm.generate(["x"], SamplingParams(structured_outputs=StructuredOutputsParams(
            json={"type": "integer", "multipleOf": 3})))
    with pytest.raises(ValueError, match="line 1"):
        llm.generate(["x"], SamplingParams(structured_outputs=StructuredOutputsParams(
            grammar="root ::= (")))
    with pytest.raises(ValueError, match="offset"):
        llm.generate(["x"], SamplingParams(structured_outputs=StructuredOutputsParams(
            regex="a(?=b)")))
    with pytest.raises(ValueError, match="exactly one"):
        StructuredOutputsParams(regex="a", choice=["b"])


def test_skip_special_tokens(llm):
    # <s> (id 1) is a control token: hidden by default, its text with skip_special_tokens=False.
    forced = dict(temperature=0, max_tokens=3, ignore_eos=True, logit_bias={1: 100})
    hidden = llm.generate(["Once"], SamplingParams(**forced))[0].outputs[0]
    assert list(hidden.token_ids) == [1, 1, 1]
    assert hidden.text == ""
    shown = llm.generate(["Once"], SamplingParams(skip_special_tokens=False, **forced))
    assert shown[0].outputs[0].text == "<s><s><s>"
    tok = llm.get_tokenizer()
    assert tok.decode([1, 1]) == ""
    assert tok.decode([1, 1], skip_special_tokens=False) == "<s><s>"
