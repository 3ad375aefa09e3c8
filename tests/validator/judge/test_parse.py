"""Reading judge answers: bare JSON, the last verdict object, repaired truncations; quotes resolved to spans."""

from __future__ import annotations

import json

import pytest

from shoparena.validator.judge.parse import AnswerError, parse_answer, resolve_quotes

TRACE = "QUERY: a bow\nSummary: 3 calls: 1 inference\nTHINKING: 3706669986 costs ₱256 and matches.\n"


@pytest.mark.parametrize("text", [
    '{"reasoning_quality": 0.7, "gate": 4, "explanation": "Gate 4 failed", "evidence": [{"quote": "x"}]}',
    '  {"reasoning_quality": "0.7", "explanation": "Gate 4 failed"}  ',
    '<think>first {"reasoning_quality": 0.9} then no</think>\nFinal:\n```json\n{"reasoning_quality": 0.7, '
    '"evidence": [{"gate": 3, "quote": "costs"}], "explanation": "Gate 4 failed"}\n```',
    'Here is my verdict: {"reasoning_quality": 0.7, "explanation": "Gate 4 failed: no comparison',
    '{"evidence": [{"quote": "3706669986 costs"}], "reasoning_quality": 0.7, "explanation": "Gate 4 fa',
    '{"reasoning_quality": 0.7, "evidence": [{"gate": 1, "quote": "3 calls"}, {"qu',
])
def test_accepted_forms(text: str) -> None:
    answer = parse_answer(text)
    assert answer.score == 0.7 and answer.gate == 4


def test_last_object_wins_and_repair_is_flagged() -> None:
    assert parse_answer('{"reasoning_quality": 0.1} {"reasoning_quality": 0.5}').score == 0.5
    assert parse_answer('{"reasoning_quality": 0.3, "explanation": "cut').repaired
    assert not parse_answer('{"reasoning_quality": 0.3}').repaired


@pytest.mark.parametrize(("text", "kind"), [
    ("", "unparseable"), ("I would give it 0.9.", "unparseable"), ("null", "unparseable"),
    ('"reasoning_quality" is 0.9', "unparseable"), ('{"reasoning_quality": 0.85}', "invalid"),
    ('{"reasoning_quality": "high"}', "invalid"), ('{"reasoning_quality": 1.0}', "invalid"),
])
def test_rejected_forms(text: str, kind: str) -> None:
    with pytest.raises(AnswerError) as err:
        parse_answer(text)
    assert err.value.kind == kind


def test_quotes_resolve_to_exact_spans() -> None:
    at = TRACE.index("3706669986")
    evidence = [{"gate": 3, "quote": "3706669986 costs ₱256", "start": at, "end": at + 21},
                {"gate": 1, "quote": "Summary:  3 calls"}, {"gate": 2, "quote": '"costs ₱256 and matches…"'}]
    answer = parse_answer(json.dumps({"reasoning_quality": 0.7, "evidence": evidence}))
    spans = resolve_quotes(TRACE, answer)
    assert [(s.gate, s.text) for s in spans] == [(3, "3706669986 costs ₱256"), (1, "Summary: 3 calls"),
                                                 (2, "costs ₱256 and matches")]
    assert all(TRACE[s.start:s.end] == s.text for s in spans)
    wrong_offsets = parse_answer('{"reasoning_quality": 0.7, "evidence": [{"quote": "costs ₱256", "start": 0, '
                                 '"end": 10}]}')
    assert resolve_quotes(TRACE, wrong_offsets)[0].start == TRACE.index("costs ₱256")  # found by its text


@pytest.mark.parametrize("evidence", [
    '[{"quote": "3706669986 costs ₱999"}]',  # not in the trace
    '[{"quote": "3706669986"}, {"quote": "the agent compared two bows"}]',  # one good, one invented
    '[{"quote": "₱"}]',  # too short to mean anything
    "[]",  # nothing cited
])
def test_uncitable_answers_are_rejected(evidence: str) -> None:
    answer = parse_answer(f'{{"reasoning_quality": 0.7, "evidence": {evidence}}}')
    with pytest.raises(AnswerError) as err:
        resolve_quotes(TRACE, answer)
    assert err.value.kind == "uncited"
