"""benchmarks/judge_cv.py --drop: which feature columns a model keeps when a feature group is left out."""

from pathlib import Path

import pytest

from elical.judges.features import CORRECTNESS_FEATURES, EQUIVALENCE_FEATURES

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_cv.py"


@pytest.fixture(scope="module")
def script(load_script):
    return load_script(SCRIPT)


def test_dropped_groups_leave_exactly_their_features(script):
    dropped = script.parse_drop(["equivalence:polarity", "equivalence:length"])
    assert dropped == {"equivalence": {"polarity", "length"}}
    kept = [EQUIVALENCE_FEATURES[i] for i in script.kept_columns(EQUIVALENCE_FEATURES, "equivalence", dropped)]
    assert set(EQUIVALENCE_FEATURES) - set(kept) == {"yesno_conflict", "negation_parity_differs", "length_gap"}
    assert kept == [f for f in EQUIVALENCE_FEATURES if f in kept]  # order kept
    # another task's groups are untouched
    assert script.kept_columns(CORRECTNESS_FEATURES, "correctness", dropped) == list(range(len(CORRECTNESS_FEATURES)))


@pytest.mark.parametrize("value", ["equivalence:nothing", "polarity", "correctness:polarity", ":options"])
def test_unknown_group_is_refused(script, value):
    with pytest.raises(ValueError, match="not a TASK:GROUP"):
        script.parse_drop([value])


def test_command_line_refuses_an_unknown_group_with_exit_code_2(script, capsys):
    with pytest.raises(SystemExit) as e:
        script.main(["--drop", "equivalence:nothing"])
    assert e.value.code == 2 and "equivalence:nothing" in capsys.readouterr().err
