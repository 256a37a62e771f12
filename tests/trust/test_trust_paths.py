"""Path options fail closed: an empty value is refused however it is given, and no output of a run
is ever one of its inputs. Each case is a real ``pytest --rag-eval`` session that must stop with
a usage error (exit code 4) before anything is retrieved or written."""

from __future__ import annotations

import os

import pytest
from trust_helpers import TrustProject, assert_usage_error, snapshot

from pytest_ragmetrics._plugin.options import PATH_OPTIONS

FLAGS = [f"--{dest.replace('_', '-')}" for dest, _, _ in PATH_OPTIONS]
INI_KEYS = [ini for _, ini, _ in PATH_OPTIONS if ini]


def _refused_before_anything(project: TrustProject, *args: str) -> str:
    before = snapshot(project.path)
    result = project.run(*args)
    assert project.calls() == []
    assert snapshot(project.path) == before
    return assert_usage_error(result)


def test_every_path_option_is_checked_here() -> None:
    """The options table's path options are the ones these tests cover (a new one joins PATH_OPTIONS)."""
    from pytest_ragmetrics._plugin.options import OPTIONS

    path_flags = {spec.flag for spec in OPTIONS if spec.metavar == "PATH"}
    assert path_flags == set(FLAGS)


# ------------------------------------------------------------------ empty values


@pytest.mark.parametrize("value", ["", "  "])
@pytest.mark.parametrize("flag", FLAGS)
def test_an_empty_flag_value_is_refused(baselined: TrustProject, flag: str, value: str) -> None:
    message = _refused_before_anything(baselined, f"{flag}={value}")
    assert f"{flag} was given an empty path (an unset variable?)" in message
    assert "never read as the default" in message


@pytest.mark.parametrize("ini", INI_KEYS)
def test_an_empty_ini_value_in_the_ini_file_is_refused(baselined: TrustProject, ini: str) -> None:
    baselined.ini(**{ini: ""})
    message = _refused_before_anything(baselined)
    assert f"{ini} in pytest.ini is an empty path (an unset variable?)" in message


@pytest.mark.parametrize("value", ["", "   "])
@pytest.mark.parametrize("ini", INI_KEYS)
def test_an_empty_override_ini_value_is_refused(baselined: TrustProject, ini: str, value: str) -> None:
    message = _refused_before_anything(baselined, "-o", f"{ini}={value}")
    assert f"-o {ini}= is an empty path (an unset variable?)" in message


def test_an_empty_value_from_pytest_addopts_is_refused(baselined: TrustProject,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """`PYTEST_ADDOPTS="-o rag_thresholds=$THRESHOLDS"` with the variable unset in CI."""
    baselined.thresholds({"max_regressed_queries": 0})
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{os.environ.get('PYTEST_ADDOPTS', '')} -o rag_thresholds=")
    message = _refused_before_anything(baselined)
    assert "-o rag_thresholds= is an empty path" in message
    assert "write 'defaults' to gate with the built-in defaults on purpose" in message
