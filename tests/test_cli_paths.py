"""Every ``ragmetrics`` verb's path arguments fail closed: an empty path is refused, and no output
is ever one of the verb's inputs (``--force`` or not). The tests walk the verbs' parsers, so a new
verb or option cannot be left out: each string option is a path (refusing an empty value) or is
listed here as not one, and each output option has a case below that points it at an input."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from pytest_ragmetrics.cli import VERBS, build_parser, main
from pytest_ragmetrics.cli.argtypes import OUTPUTS, chunk_size_arg, count_arg, seed_arg

#: String options that do not name a file: (verb, dest); verb "*" for every verb.
NOT_PATHS = {
    ("*", "metrics"), ("*", "id_separator"), ("*", "query_prefix"), ("*", "passage_prefix"),
    ("ablate", "modes"), ("ablate", "sweep"), ("ablate", "sweep_mode"), ("ablate", "by"),
    ("agreement", "annotators"), ("annotate", "annotator"), ("encoders", "backends"), ("export", "tag"),
    ("pool", "modes"), ("sample", "by"), ("sample", "by_missing"),
    ("baseline", "reason"), ("merge", "reason"),  # text: a blank one is refused by the verb
    ("merge", "baseline_ref"),  # a git ref: a blank one is refused by the verb
}

_NUMBERS = {int, float, count_arg, seed_arg, chunk_size_arg}


def _verbs() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {verb: sub.choices[verb] for verb in VERBS}


def _valued(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The actions that take a value from the command line (not --help, switches or --version)."""
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, argparse._HelpAction)]


def _string_options() -> list[tuple[str, argparse.Action]]:
    found = []
    for verb, parser in _verbs().items():
        for action in _valued(parser):
            number = action.type in _NUMBERS or getattr(action.type, "__name__", "") == "_share"
            if action.choices is not None or number:
                continue
            if (verb, action.dest) in NOT_PATHS or ("*", action.dest) in NOT_PATHS:
                continue
            found.append((verb, action))
    return found


def _argv_with_empty(verb: str, action: argparse.Action) -> list[str]:
    """The verb's command line with ``action`` given an empty value, every other positional filled."""
    parser = _verbs()[verb]
    positionals = [a for a in parser._actions if not a.option_strings]
    argv = [verb]
    for p in positionals:
        argv += [""] if p.dest == action.dest else ["x"]
    if action.option_strings:
        argv += [action.option_strings[-1], ""] + (["x"] if action.nargs == 2 else [])
    return argv


@pytest.mark.parametrize("verb, action", _string_options(),
                         ids=[f"{v}-{a.option_strings[-1] if a.option_strings else a.dest}"
                              for v, a in _string_options()])
def test_every_path_argument_refuses_an_empty_value(verb: str, action: argparse.Action,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`--html "$REPORT"` with the variable unset is refused, never read as the current folder or a default."""
    with pytest.raises(SystemExit) as exit_info:
        main(_argv_with_empty(verb, action))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    name = action.option_strings[-1] if action.option_strings else action.metavar or action.dest
    assert re.search(rf"argument [^:]*{re.escape(str(name))}[^:]*: an empty", err), err


def test_the_walk_sees_every_verb_and_refuses_blank_values_too(capsys: pytest.CaptureFixture[str]) -> None:
    verbs = {verb for verb, _ in _string_options()}
    assert verbs == set(VERBS)  # every verb reads at least one path
    with pytest.raises(SystemExit):
        main(["history", "   "])
    assert "argument ARTIFACT: an empty path" in capsys.readouterr().err


# ------------------------------------------------------------------ outputs


def _declared_outputs() -> set[tuple[str, str]]:
    return {(verb, option) for verb, parser in _verbs().items() for _, option, _ in parser.get_default(OUTPUTS) or ()}


def test_every_option_that_writes_is_declared_an_output() -> None:
    """An option whose name or help says it writes a file goes through the one output check."""
    declared = _declared_outputs()
    for verb, parser in _verbs().items():
        for action in _valued(parser):
            if not action.option_strings:
                continue
            option = action.option_strings[-1]
            writes = action.dest.endswith("out") or action.dest in ("html", "json", "markdown", "candidates") \
                or re.search(r"\b(write|append)", action.help or "")
            assert not writes or (verb, option) in declared, f"ragmetrics {verb} {option} writes a file but is " \
                                                             "not declared with output_argument"


def _files(tmp: Path) -> dict[str, Path]:
    """Small, valid inputs for every verb."""
    (tmp / "q.tsv").write_text("q1 0 d1 1\n", encoding="utf-8")
    (tmp / "A.trec").write_text("q1 Q0 d1 1 1.0 x\n", encoding="utf-8")
    (tmp / "B.trec").write_text("q1 Q0 d2 1 1.0 x\n", encoding="utf-8")
    for name, recall, day in (("a.json", 1.0, 1), ("b.json", 0.5, 2)):
        (tmp / name).write_text(json.dumps({
            "_meta": {"k": 3, "created": f"2026-01-0{day}T00:00:00+00:00", "measurement": {"metrics": ["recall@3"]}},
            "comparison": {}, "per_query": {"q1": {"status": "scored", "metrics": {"recall@3": recall},
                                                   "ranking": ["d1"], "_top": ["d1"], "tags": []}}}),
                                 encoding="utf-8")
    (tmp / "golden.yaml").write_text("# the team's golden set\n- id: q1\n  question: how do I fix a flat tire\n"
                                     "  gold_chunks: [d1]\n", encoding="utf-8")
    (tmp / "judged.yaml").write_text("- id: q1\n  question: how do I fix a flat tire\n  gold_chunks: {d2: 2}\n",
                                     encoding="utf-8")
    (tmp / "log.jsonl").write_text('{"query": "reset my password"}\n', encoding="utf-8")
    (tmp / "pool.jsonl").write_text("", encoding="utf-8")
    return {p.name: p for p in tmp.iterdir()}


#: (verb, output option) -> the command line pointing that output at one of the verb's inputs, and the input.
CASES: dict[tuple[str, str], Callable[[dict[str, Path]], tuple[list[str], Path, str]]] = {
    ("compare", "--html"): lambda f: (["compare", str(f["A.trec"]), str(f["B.trec"]), "--qrels", str(f["q.tsv"]),
                                       "--html", str(f["B.trec"])], f["B.trec"], "is run B"),
    ("merge", "--out"): lambda f: (["merge", str(f["a.json"]), "--out", str(f["a.json"])], f["a.json"], "is a shard"),
    ("merge", "--markdown"): lambda f: (["merge", str(f["a.json"]), "--markdown", str(f["a.json"])], f["a.json"],
                                        "is a shard"),
    ("merge", "--html"): lambda f: (["merge", str(f["a.json"]), "--golden", str(f["golden.yaml"]), "--html",
                                     str(f["golden.yaml"])], f["golden.yaml"], "is the golden set"),
    ("history", "--html"): lambda f: (["history", str(f["a.json"]), str(f["b.json"]), "--html", str(f["a.json"])],
                                      f["a.json"], "is the run artifact"),
    ("pool", "--out"): lambda f: (["pool", "--queries", str(f["golden.yaml"]), "--run", str(f["A.trec"]), "--out",
                                   str(f["golden.yaml"]), "--force"], f["golden.yaml"], "is the questions (--queries)"),
    ("harvest", "--out"): lambda f: (["harvest", str(f["a.json"]), "--out", str(f["a.json"]), "--force"],
                                     f["a.json"], "is a run artifact"),
    ("annotate", "--out"): lambda f: (["annotate", str(f["pool.jsonl"]), "--annotator", "ann", "--out",
                                       str(f["pool.jsonl"])], f["pool.jsonl"], "is the candidates file"),
    ("export", "--run-out"): lambda f: (["export", "--artifact", str(f["a.json"]), "--run-out", str(f["a.json"]),
                                         "--force"], f["a.json"], "is the run artifact (--artifact)"),
    ("export", "--qrels-out"): lambda f: (["export", "--golden", str(f["golden.yaml"]), "--qrels-out",
                                           str(f["golden.yaml"]), "--force"], f["golden.yaml"],
                                          "is the golden set (--golden)"),
    ("export", "--yaml-out"): lambda f: (["export", "--golden", str(f["golden.yaml"]), "--yaml-out",
                                          str(f["golden.yaml"]), "--force"], f["golden.yaml"],
                                         "is the golden set (--golden)"),
    ("export", "--golden-out"): lambda f: (["export", "--golden", str(f["golden.yaml"]), "--merge",
                                            str(f["judged.yaml"]), "--golden-out", str(f["judged.yaml"]), "--force"],
                                           f["judged.yaml"], "is the judgments (--merge)"),
    ("sample", "--out"): lambda f: (["sample", str(f["log.jsonl"]), "--n", "1", "--out", str(f["log.jsonl"]),
                                     "--force"], f["log.jsonl"], "is the query log"),
    ("shadow", "--html"): lambda f: (["shadow", "--run-a", str(f["a.json"]), "--run-b", str(f["b.json"]), "--html",
                                      str(f["b.json"])], f["b.json"], "is run B (--run-b)"),
    ("shadow", "--json"): lambda f: (["shadow", "--run-a", str(f["a.json"]), "--run-b", str(f["b.json"]), "--json",
                                      str(f["a.json"])], f["a.json"], "is run A (--run-a)"),
    ("shadow", "--candidates"): lambda f: (["shadow", "--run-a", str(f["a.json"]), "--run-b", str(f["b.json"]),
                                            "--candidates", str(f["b.json"]), "--force"], f["b.json"],
                                           "is run B (--run-b)"),
}


def test_every_output_option_has_a_case() -> None:
    assert set(CASES) == _declared_outputs()


@pytest.mark.parametrize("verb, option", sorted(CASES))
def test_no_output_is_an_input_even_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str], verb: str,
                                               option: str) -> None:
    files = _files(tmp_path)
    argv, protected, what = CASES[(verb, option)](files)
    before = {p: p.read_bytes() for p in files.values()}
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"ragmetrics {verb}: error: {option} {protected} {what}: an output is never written over an input" in err
    assert {p: p.read_bytes() for p in files.values()} == before
    assert sorted(tmp_path.iterdir()) == sorted(files.values())


def test_links_and_dotdot_spellings_are_the_same_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path)
    (tmp_path / "link.html").symlink_to(files["b.json"])
    (tmp_path / "sub").mkdir()
    for out in (tmp_path / "link.html", tmp_path / "sub" / ".." / "b.json"):
        assert main(["history", str(files["a.json"]), str(files["b.json"]), "--html", str(out)]) == 2
        assert f"--html {out} is the run artifact ({files['b.json']})" in capsys.readouterr().err
    assert files["b.json"].read_text(encoding="utf-8").startswith("{")


def test_an_output_inside_an_input_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """history reads every *.json of a folder: a page written into it would be read as a run next time."""
    nights = tmp_path / "nights"
    nights.mkdir()
    files = _files(nights)
    assert main(["history", str(nights), "--html", str(nights / "trend.json")]) == 2
    assert f"--html {nights / 'trend.json'} is inside the run artifact ({nights}), a folder that is read whole" \
        in capsys.readouterr().err
    assert sorted(nights.iterdir()) == sorted(files.values())


@pytest.mark.parametrize("name", ["conftest.py", "pyproject.toml", "pytest.ini", "tox.ini", "setup.cfg"])
def test_a_project_configuration_file_is_never_an_output(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         name: str) -> None:
    files = _files(tmp_path)
    assert main(["compare", str(files["A.trec"]), str(files["B.trec"]), "--qrels", str(files["q.tsv"]), "--html",
                 str(tmp_path / name)]) == 2
    assert f"--html {tmp_path / name} is a project configuration file ({name})" in capsys.readouterr().err
    assert not (tmp_path / name).exists()


def test_two_outputs_on_one_file_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path)
    out = tmp_path / "out.txt"
    assert main(["export", "--golden", str(files["golden.yaml"]), "--qrels-out", str(out), "--yaml-out",
                 str(out)]) == 2
    assert f"--qrels-out and --yaml-out are the same file ({out})" in capsys.readouterr().err
    assert not out.exists()


def test_the_golden_set_may_be_merged_into_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--golden-out over --golden is the one rewrite of an input a verb makes on purpose."""
    files = _files(tmp_path)
    assert main(["export", "--golden", str(files["golden.yaml"]), "--merge", str(files["judged.yaml"]),
                 "--golden-out", str(files["golden.yaml"]), "--force"]) == 0, capsys.readouterr().err
    assert "d2" in files["golden.yaml"].read_text(encoding="utf-8")


def test_outputs_apart_from_the_inputs_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path)
    assert main(["compare", str(files["A.trec"]), str(files["B.trec"]), "--qrels", str(files["q.tsv"]), "--html",
                 str(tmp_path / "report.html")]) == 0
    assert (tmp_path / "report.html").read_text(encoding="utf-8").startswith("<!doctype html>")
    assert main(["history", str(files["a.json"]), str(files["b.json"]), "--html", "/dev/null"]) == 0


def _project_files(tmp: Path) -> dict[str, Path]:
    """A project's own files, none of them given to the command: a sealed baseline, a thresholds file, a
    golden set, a conftest.py and a git folder."""
    from pytest_ragmetrics.gate.baseline import Baseline, write_baseline

    (tmp / "baselines").mkdir()
    meta = {"measurement": {"metrics": ["recall@3"], "relevance_level": 1, "gain": "exponential",
                            "id_separator": "#"}, "k": 3}
    write_baseline(tmp / "baselines" / "baseline.json",
                   Baseline(meta, {"recall@3": 1.0}, {"q1": {"recall@3": 1.0, "_judgments": "x", "_top": ["d1"]}}))
    (tmp / "baselines" / "thresholds.json").write_text('{"recall@3_tolerance": 0.0}', encoding="utf-8")
    (tmp / "eval").mkdir()
    (tmp / "eval" / "golden.yaml").write_text("- {id: q1, question: flat tire, gold_chunks: [d1]}\n", encoding="utf-8")
    (tmp / "retriever.py").write_text("class R: ...\n", encoding="utf-8")
    (tmp / ".git").mkdir()
    (tmp / ".git" / "HEAD").write_text("ref: refs/heads/main\n", encoding="utf-8")
    return {"the baseline": tmp / "baselines" / "baseline.json",
            "the thresholds file": tmp / "baselines" / "thresholds.json",
            "the golden set": tmp / "eval" / "golden.yaml", "Python source": tmp / "retriever.py",
            "git's HEAD": tmp / ".git" / "HEAD"}


@pytest.mark.parametrize("target", ["the baseline", "the thresholds file", "the golden set", "Python source",
                                    "git's HEAD"])
@pytest.mark.parametrize("verb", ["compare --html", "history --html", "merge --out", "shadow --json"])
def test_no_output_replaces_a_project_file_it_was_not_given(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            verb: str, target: str) -> None:
    """The project's baseline, thresholds, golden set and code, and git's folder, are inputs of every run,
    named on this command line or not: no output replaces them."""
    files = _files(tmp_path)
    project = _project_files(tmp_path)
    out = str(project[target])
    argv = {"compare --html": ["compare", str(files["A.trec"]), str(files["B.trec"]), "--qrels", str(files["q.tsv"]),
                               "--html", out],
            "history --html": ["history", str(files["a.json"]), str(files["b.json"]), "--html", out],
            "merge --out": ["merge", str(files["a.json"]), "--out", out],
            "shadow --json": ["shadow", "--run-a", str(files["a.json"]), "--run-b", str(files["b.json"]), "--json",
                              out]}[verb]
    before = project[target].read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "an output never replaces a file the project reads" in err or "inside .git" in err, err
    assert project[target].read_bytes() == before


@pytest.mark.parametrize("name, content", [
    ("eval/golden.jsonl", '{"qid": "q0", "query": "question 0", "candidates": [{"doc_id": "d0", "rel": 1}]}\n'),
    ("other/golden.YAML", "- {id: q1, question: flat tire, gold_chunks: [d1]}\n"),
    ("other/thresholds.json", '{"_comment": "x", "worst_n": 5, "fail_on_significant_drop": true}'),
    (".github/workflows/rag.yml", "on: [pull_request]\njobs: {}\n"),
    ("notes.txt", "a team's notes\n"),
])
def test_an_html_report_replaces_only_an_html_report(tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str,
                                                     content: str) -> None:
    """Not a list of kinds to protect but one to allow: an output replaces an existing file only when that
    file is the kind it writes, so a file the tool does not know (a CI workflow, notes) is safe too."""
    files = _files(tmp_path)
    target = tmp_path / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(content, encoding="utf-8")
    argv = ["compare", str(files["A.trec"]), str(files["B.trec"]), "--qrels", str(files["q.tsv"]), "--html",
            str(target)]
    assert main(argv) == 2
    assert f"--html {target} exists and is" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == content
    target.write_text("<!doctype html><p>an older report</p>", encoding="utf-8")  # a report: replaced
    assert main(argv) in (0, 1)
    assert target.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html")
    assert "an older report" not in target.read_text(encoding="utf-8")
