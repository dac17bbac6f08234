"""Greedy parity's comparison (core/parity.py) and the parsers of each API's answer
(load/greedy.py), on answers shaped as the engines' own code builds them."""

import pytest

from pytest_llmperf.core.outcome import Outcome
from pytest_llmperf.core.parity import GreedyOutput, compare, continue_past_ties, judge
from pytest_llmperf.load.greedy import PARSERS, GreedyError, Unverifiable


def out(tokens, gaps=None, texts=None, finish="length", runner_up=None):
    """A continuation; the base's runner-up at each position is ``runner_up`` (default: token
    + 100, a token no test emits)."""
    texts = texts or tuple(f" w{t}" for t in tokens)
    seconds = tuple(runner_up or [t + 100 for t in tokens])
    return GreedyOutput("a prompt", tuple(tokens), tuple(texts), tuple(gaps or [2.0] * len(tokens)),
                        finish, runner_up=seconds)  # fmt: skip


def test_identical_continuations_have_no_divergence():
    p = compare(1, out([1, 2, 3]), out([1, 2, 3]), tie_gap=0.1)
    assert p.identical and p.position is None and p.tokens == 3


def test_the_first_divergent_position_both_tokens_and_the_base_gap_there():
    base = out([1, 2, 3, 4], gaps=[2.0, 3.0, 0.05, 1.0], runner_up=[5, 6, 9, 8])
    p = compare(1, base, out([1, 2, 9, 4]), tie_gap=0.1)
    assert (p.position, p.base_token, p.spec_token, p.gap) == (2, " w3", " w9", 0.05)
    assert p.excused, p.describe()  # 0.05 ≤ 0.1 and 9 is the base's runner-up: a near-tie
    assert p.runner_up is True
    assert p.compared == 3  # up to the divergence
    assert p.base_continuation == " w3 w4" and p.spec_continuation == " w9 w4"
    sure = compare(1, out([1, 2, 3, 4], runner_up=[5, 6, 9, 8]), out([1, 2, 9, 4]), tie_gap=0.1)
    assert not sure.excused and sure.gap == 2.0


def test_a_near_tie_excuses_only_the_base_runner_up_never_a_third_token():
    """A near-tie can swap the base's top two; a verifier that accepted a wrong draft emits any
    token, most likely where the base is least sure: a third token there is a fault."""
    base = out([1, 2, 3, 4], gaps=[2.0, 3.0, 0.05, 1.0], runner_up=[5, 6, 9, 8])
    swap = compare(1, base, out([1, 2, 9, 4]), tie_gap=0.1)
    third = compare(1, base, out([1, 2, 7, 4]), tie_gap=0.1)
    assert swap.excused
    assert not third.excused
    assert third.runner_up is False
    assert "not the base's runner-up, so no near-tie excuses it" in third.describe()
    verdict = judge("spec", "base", "t", [base], [out([1, 2, 7, 4])], tie_gap=0.1)
    assert verdict.outcome is Outcome.FAIL, verdict.message


def test_a_continuation_that_stops_early_diverges_where_it_stopped():
    p = compare(1, out([1, 2, 3]), out([1, 2], finish="stop"), tie_gap=0.1)
    assert p.position == 2 and p.spec_token == "<end: stop>"


def test_no_log_probabilities_means_no_divergence_can_be_excused():
    base = GreedyOutput("p", ("a", "b"), ("a", "b"), (None, None))
    p = compare(1, base, GreedyOutput("p", ("a", "c"), ("a", "c"), (None, None)), tie_gap=10.0)
    assert not p.excused and "no log-probabilities" in p.describe()


def test_the_pair_fails_on_a_real_divergence_and_passes_on_near_ties_only():
    base = [out([1, 2, 3], gaps=[2.0, 0.01, 2.0], runner_up=[0, 9, 0]), out([4, 5, 6])]
    tie = judge("spec", "base", "t", base, [out([1, 9, 3]), out([4, 5, 6])], tie_gap=0.1)
    assert tie.outcome is Outcome.PASS and tie.identical == 1 and tie.fraction == 0.5
    assert tie.message.endswith(
        "PASS; 1 near-tie(s) excused (the base's runner-up, top-2 gap ≤ 0.1)"
    )
    assert "(5 tokens compared)" in tie.message  # 2 up to the near-tie, 3 of the other
    wrong = judge("spec", "base", "t", base, [out([1, 2, 3]), out([4, 5, 7])], tie_gap=0.1)
    assert wrong.outcome is Outcome.FAIL and [p.index for p in wrong.faults] == [2]
    assert "diverges at token 2: base ' w6', speculative ' w7'" in wrong.message
    assert wrong.to_json()["per_prompt"][1]["position"] == 2


class Speculative:
    """A speculative server as parity's continuation asks it: its answer from a prompt is
    ``truth`` after the prefix the prompt holds (the base's tokens, one word each), with the
    tokens at ``wrong`` positions replaced by ``wrong[k]`` (a fault wherever it is asked from)."""

    def __init__(self, truth, wrong):
        self.truth, self.wrong, self.asked = truth, wrong, []

    def tokens(self, start, n):
        return [self.wrong.get(k, self.truth[k]) for k in range(start, start + n)]

    def ask(self, text, n):
        self.asked.append((text, n))
        start = len(text[len("a prompt") :].split())  # the base's words the prompt holds
        return out(self.tokens(start, n))


def test_the_comparison_goes_on_past_an_excused_near_tie_and_finds_a_later_fault():
    """An excused near-tie (the runner-up at a gap of 0.05) does not end the comparison: asked
    again from the base's token there, the speculative server goes on, and a wrong token it
    emits later where the base was sure FAILs the pair (it passed while the first tie ended it)."""
    truth = [1, 2, 3, 4, 5, 6, 7, 8]
    base = out(
        truth, gaps=[2.0, 3.0, 0.05, 1.0, 2.0, 2.0, 2.0, 2.0], runner_up=[0, 0, 9, 0, 0, 0, 0, 0]
    )
    server = Speculative(truth, {2: 9, 6: 42})
    spec = out(server.tokens(0, 8))
    assert (
        judge("spec", "base", "t", [base], [spec], 0.1).outcome is Outcome.PASS
    )  # the tie ends it
    taken = continue_past_ties(base, spec, 0.1, server.ask)
    assert server.asked == [("a prompt w1 w2 w3", 5)]  # the base's token at the tie, the rest
    p = compare(1, base, taken, tie_gap=0.1)
    assert (p.position, p.ties, p.excused, p.spec_token) == (6, (2,), False, " w42")
    assert p.compared == 7
    assert "after 1 excused near-tie(s) (at token 2)" in p.describe()
    pair = judge("spec", "base", "t", [base], [taken], 0.1)
    assert pair.outcome is Outcome.FAIL and "(7 tokens compared)" in pair.message
    assert pair.to_json()["per_prompt"][0]["near_ties_continued"] == [2]


def test_a_prompt_identical_past_its_near_ties_passes_with_every_token_compared():
    truth = [1, 2, 3, 4, 5, 6]
    base = out(truth, gaps=[2.0, 0.05, 2.0, 0.02, 2.0, 2.0], runner_up=[0, 7, 0, 8, 0, 0])
    server = Speculative(truth, {1: 7, 3: 8})
    taken = continue_past_ties(base, out(server.tokens(0, 6)), 0.1, server.ask)
    assert len(server.asked) == 2
    p = compare(1, base, taken, tie_gap=0.1)
    assert p.position is None and p.ties == (1, 3) and not p.identical and p.compared == 6
    pair = judge("spec", "base", "t", [base], [taken], 0.1)
    assert pair.outcome is Outcome.PASS and pair.identical == 0 and pair.compared == 6
    assert pair.message.endswith(
        "2 near-tie(s) excused (the base's runner-up, top-2 gap ≤ 0.1), "
        "2 compared past (asked again from the base's token)"
    )
    # Judged with a tighter tie gap, the first near-tie is the fault, with the token the
    # speculative server emitted there before it was asked again.
    strict = compare(1, base, taken, tie_gap=0.01)
    assert (strict.position, strict.excused, strict.spec_token, strict.ties) == (
        1,
        False,
        " w7",
        (),
    )


def test_a_third_token_or_a_missing_text_is_not_continued_past():
    truth = [1, 2, 3, 4]
    base = out(truth, gaps=[2.0, 0.05, 2.0, 2.0], runner_up=[0, 7, 0, 0])
    third = Speculative(truth, {1: 8})
    continue_past_ties(base, out(third.tokens(0, 4)), 0.1, third.ask)
    assert third.asked == []  # not excused: nothing to continue
    untold = Speculative(truth, {1: 7})
    mute = out(truth, gaps=base.gaps, texts=["", "", "", ""], runner_up=base.runner_up)
    continue_past_ties(mute, out(untold.tokens(0, 4)), 0.1, untold.ask)
    assert untold.asked == []  # the base's tokens have no text to ask with


def test_sglang_native_answer():
    body = {
        "text": " a b",
        "meta_info": {
            "finish_reason": {"type": "length", "length": 2},
            "output_token_logprobs": [[-0.1, 11, " a"], [-0.5, 12, " b"]],
            "output_top_logprobs": [
                [[-0.1, 11, " a"], [-2.6, 13, " c"]],
                [[-0.5, 12, " b"], [-0.55, 14, " d"]],
            ],
        },
    }
    o = PARSERS["sglang"](body, "p")
    assert o.tokens == (11, 12) and o.texts == (" a", " b") and o.finish == "length"
    assert o.gaps == pytest.approx((2.5, 0.05))
    assert o.runner_up == (13, 14)


def test_sglang_log_probabilities_short_of_the_tokens_generated_are_unverifiable():
    """sgl-project/sglang#14046: under speculation the list can stop after the first token
    while completion_tokens counts them all: not comparable, so not a parity FAIL either."""
    body = {
        "text": " a b c",
        "meta_info": {
            "completion_tokens": 3,
            "output_token_logprobs": [[-0.1, 11, " a"]],
            "output_top_logprobs": [[[-0.1, 11, " a"], [-2.6, 13, " c"]]],
        },
    }
    with pytest.raises(Unverifiable, match="cover 1 of the 3 tokens it generated"):
        PARSERS["sglang"](body, "p")
    body["meta_info"]["completion_tokens"] = 1
    assert PARSERS["sglang"](body, "p").tokens == (11,)


def test_llamacpp_native_answer():
    body = {
        "content": " a b",
        "stopped_limit": True,
        "completion_probabilities": [
            {"id": 11, "token": " a", "logprob": -0.1,
             "top_logprobs": [{"id": 11, "token": " a", "logprob": -0.1},
                              {"id": 13, "token": " c", "logprob": -3.1}]},
        ],
    }  # fmt: skip
    o = PARSERS["llamacpp"](body, "p")
    assert o.tokens == (11,) and o.gaps == pytest.approx((3.0,)) and o.finish == "length"
    assert o.runner_up == (13,)
    with pytest.raises(Unverifiable):
        PARSERS["llamacpp"]({**body, "tokens_predicted": 4}, "p")


def test_openai_completions_answer_compares_token_text():
    body = {
        "choices": [
            {
                "finish_reason": "length",
                "logprobs": {
                    "tokens": [" a", " b"],
                    "top_logprobs": [{" a": -0.1, " c": -1.1}, {" b": -0.2}],
                },
            }
        ]
    }
    o = PARSERS["openai"](body, "p")
    assert o.tokens == (" a", " b") and o.gaps[0] == pytest.approx(1.0) and o.gaps[1] is None
    assert o.runner_up == (" c", None)


@pytest.mark.parametrize("api", ["sglang", "llamacpp", "openai"])
def test_an_answer_without_log_probabilities_is_a_one_line_error(api):
    with pytest.raises(GreedyError):
        PARSERS[api]({"text": "x", "meta_info": {}, "choices": [{}]}, "p")
