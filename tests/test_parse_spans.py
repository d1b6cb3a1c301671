"""kernel.field_spans: each parsed field's place in the original text, under both policies."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernel import PARSE_POLICIES, FieldSpans, field_spans, parse_response
from kernel._parse_robust import _strip
from kernel.testing.strategies import agent_outputs, near_miss_xml
from tests._profile import examples

_FIELDS = ("solution", "evaluation", "comparison", "consensus", "consensus_reason")
_THINK = re.compile(r"</?think>", re.IGNORECASE)
_TEXTS = st.one_of(agent_outputs(), near_miss_xml(), st.text(max_size=200))


def _content(text: str, span: object, policy: str) -> str:
    body, end = span.body, span.end  # type: ignore[attr-defined]
    if policy == "reference":  # v1 deletes think markers everywhere, fields included
        return _THINK.sub("", text[body:end]).strip()
    return _strip(text[body:end])


@settings(max_examples=examples(300))
@given(text=_TEXTS, policy=st.sampled_from(PARSE_POLICIES))
def test_every_parsed_field_is_its_span_and_only_those_have_one(text: str, policy: str) -> None:
    parsed = parse_response(text, policy=policy)  # type: ignore[arg-type]
    spans = field_spans(text, policy=policy)  # type: ignore[arg-type]
    for name in _FIELDS:
        span = getattr(spans, name)
        if policy == "reference" and name == "consensus" and span is not None and parsed.ok:
            assert parsed.consensus == (_content(text, span, policy).upper() == "YES")
            continue
        if span is None:
            assert getattr(parsed, name, "") in ("", False) or name == "consensus", name
            continue
        assert 0 <= span.start <= span.body <= span.end <= span.stop <= len(text)
        if name == "consensus":
            continue  # the flag, not the text, is returned
        assert _content(text, span, policy) == getattr(parsed, name), name


@settings(max_examples=examples(200))
@given(text=agent_outputs())
def test_a_robust_block_runs_from_its_opening_tag_to_its_closing_tag(text: str) -> None:
    for name in _FIELDS:
        span = getattr(field_spans(text), name)
        if span is None:
            continue
        block = text[span.start : span.stop].lower()
        assert block.startswith(f"<{name}")
        assert block.endswith(f"</{name}>") or span.stop == span.end  # an unclosed last field


def test_the_two_credit_bugs_of_a_text_search() -> None:
    """A <solution> mentioned in the reasoning, and a draft block before the answer: the first tag a
    search finds is neither what the robust parser reads."""
    tail = "<evaluation>e</evaluation><comparison>N/A</comparison><consensus>NO</consensus>"
    tail += "<consensus_reason>r</consensus_reason>"
    thinking = "<think>I will write <solution>x</solution> later</think><solution>42</solution>" + tail
    s = field_spans(thinking).solution
    assert s is not None and thinking[s.start : s.stop] == "<solution>42</solution>"
    drafts = "<solution>41</solution>" + tail + " wait, no: <solution>42</solution>" + tail
    s = field_spans(drafts).solution
    assert s is not None and drafts[s.body : s.end] == "42" and s.start > drafts.index("wait")
    assert parse_response(drafts).solution == "42"


def test_reference_spans_skip_a_preamble_and_map_past_deleted_markers() -> None:
    text = "  sure <solution>a<think>b</think>c</solution><evaluation>e</evaluation>"
    s = field_spans(text, policy="reference").solution
    assert s is not None and text[s.start : s.stop] == "<solution>a<think>b</think>c</solution>"
    assert parse_response(text, policy="reference").solution == "abc"


def test_no_spans_for_no_text_and_a_bad_policy_is_named() -> None:
    assert field_spans(None) == FieldSpans(None, None, None, None, None)  # type: ignore[arg-type]
    assert field_spans("<think>never closed <solution>1</solution>") == FieldSpans(
        None, None, None, None, None
    )
    with pytest.raises(ValueError, match="policy must be one of"):
        field_spans("x", policy="loose")  # type: ignore[arg-type]
