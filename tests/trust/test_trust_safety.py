"""Safety: data files are parsed, never executed; text reaching Markdown or HTML stays text;
the default configuration (the demo gate) runs with no network at all.
"""

from __future__ import annotations

import ast
import html.parser
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

from demo_run import DemoRun, guarded_env
from ragproject import GOOD, rag_summary
from trust_helpers import TrustProject

from pytest_ragmetrics import golden as _golden
from pytest_ragmetrics.report.tables import escape_cell, markdown_table
from pytest_ragmetrics.cli import main

PACKAGE = Path(_golden.__file__).resolve().parent
REPO = PACKAGE.parent
SOURCES = sorted(PACKAGE.rglob("*.py"))

# ------------------------------------------------------------- parsed, never executed

#: Modules that deserialise by running code, and calls that run text as code.
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "marshal", "shelve", "joblib", "jsonpickle"}
FORBIDDEN_BUILTINS = {"eval", "exec", "compile", "__import__"}
UNSAFE_YAML = {"unsafe_load", "unsafe_load_all", "full_load", "full_load_all", "Loader", "UnsafeLoader",
               "FullLoader", "load_all"}
SAFE_LOADERS = {"SafeLoader", "CSafeLoader", "_yaml_loader"}


def _code_names(path: Path) -> set[str]:
    """Identifiers used in code (comments and strings, docstrings included, left out)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return {t.string for t in tokens if t.type == tokenize.NAME}


@pytest.mark.parametrize("path", SOURCES, ids=[p.relative_to(PACKAGE).as_posix() for p in SOURCES])
def test_no_source_file_can_execute_data(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            problems += [f"import {a.name}" for a in node.names if a.name.split(".")[0] in FORBIDDEN_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FORBIDDEN_MODULES:
            problems.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_BUILTINS:
                problems.append(f"{func.id}() at line {node.lineno}")
            if isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if owner == "yaml" and func.attr == "load":
                    loader = next((k.value for k in node.keywords if k.arg == "Loader"), None)
                    name = (loader.func if isinstance(loader, ast.Call) else loader)
                    name = getattr(name, "id", None) or getattr(name, "attr", None)
                    if name not in SAFE_LOADERS:
                        problems.append(f"yaml.load without a safe Loader at line {node.lineno}")
                if owner == "torch" and func.attr == "load":
                    problems.append(f"torch.load (unpickles) at line {node.lineno}")
                if func.attr in ("read_pickle", "to_pickle"):
                    problems.append(f"{func.attr} at line {node.lineno}")
                if any(k.arg == "allow_pickle" and not (isinstance(k.value, ast.Constant) and k.value.value is False)
                       for k in node.keywords):
                    problems.append(f"allow_pickle at line {node.lineno}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "yaml" \
                and node.attr in UNSAFE_YAML:
            problems.append(f"yaml.{node.attr} at line {node.lineno}")
    names = _code_names(path)
    problems += [f"uses the name {n!r}" for n in sorted(names & (FORBIDDEN_MODULES | {"eval", "exec"}))]
    assert problems == [], f"{path.relative_to(REPO)}: {problems}"


def test_the_round_trip_of_a_golden_yaml_never_runs_a_tag(tmp_path: Path) -> None:
    """export --merge re-reads the golden YAML to keep its comments: a tag stays data there too."""
    from pytest_ragmetrics.tools.export import merged_golden_yaml

    marker = tmp_path / "PWNED"
    golden = tmp_path / "golden.yaml"
    golden.write_text(f"- id: q1\n  question: !!python/object/apply:os.system ['touch {marker}']\n"
                      "  gold_chunks: [a]\n", encoding="utf-8")
    assert merged_golden_yaml(golden, [], []) is None  # q1 is not in the set given: nothing kept
    assert not marker.exists()


def test_the_golden_yaml_loader_is_a_safe_loader() -> None:
    loader = _golden._yaml_loader()
    assert issubclass(loader, (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    assert not any(str(tag).startswith("tag:yaml.org,2002:python/") for tag in loader.yaml_constructors)
    assert not loader.yaml_multi_constructors  # no python/object:* families


@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['touch {marker}']",
    "!!python/object/new:os.system ['touch {marker}']",
    "!!python/object:__main__.Anything {{a: 1}}",
    "!!python/name:os.system",
    "!!python/module:os",
    "!!python/tuple [1, 2]",
    "!!python/bytes b3V0",
    "!python/object/apply:os.system ['touch {marker}']",
], ids=["apply", "new", "object", "name", "module", "tuple", "bytes", "local-tag"])
def test_object_building_tags_are_refused_and_never_run(tmp_path: Path, tag: str) -> None:
    marker = tmp_path / "PWNED"
    golden = tmp_path / "golden.yaml"
    golden.write_text(f"- id: q1\n  question: {tag.format(marker=marker)}\n  gold_chunks: [a]\n", encoding="utf-8")
    with pytest.raises(_golden.InputError, match=r"golden\.yaml, line 2: invalid YAML: could not determine a "
                                                  r"constructor"):
        _golden.load_golden(golden)
    assert not marker.exists()


# ------------------------------------------------------------ Markdown tables stay tables

HOSTILE = [
    "a | b",
    "two\nlines",
    "crlf\r\nline",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<!-- a comment",
    "<https://example.org>",
    "back\\slash \\| and \\<b>",
    "tab\there",
    "ansi \x1b[31mred\x1b[0m",
    "unicode\u2028separator",
    "plain (<1/n) and a < b",
]


def _cells(line: str) -> list[str]:
    """Split a GFM table row on unescaped pipes (a backslash escapes the next character)."""
    assert line.startswith("| ") and line.endswith(" |"), line
    cells, current, i = [], "", 1
    body = line[1:-1]
    while i <= len(body):
        ch = body[i - 1]
        if ch == "\\" and i < len(body):
            current += ch + body[i]
            i += 2
            continue
        if ch == "|":
            cells.append(current)
            current = ""
        else:
            current += ch
        i += 1
    cells.append(current)
    return [c.strip() for c in cells]


def test_escaped_cells_keep_every_row_one_line_with_the_right_cells() -> None:
    rows = [[text, i, 0.5] for i, text in enumerate(HOSTILE)]
    table = markdown_table(["query", "n", "recall@10"], rows)
    lines = table.split("\n")
    assert len(lines) == len(HOSTILE) + 2
    for line in lines[:1] + lines[2:]:
        assert len(_cells(line)) == 3, line
    for line in lines:
        assert not re.search(r"(?<!\\)<[A-Za-z/!?]", line), line  # no raw tag, comment or autolink
        assert "\x1b" not in line
    assert _cells(lines[2])[0] == r"a \| b"
    assert _cells(lines[3])[0] == "two lines"
    assert _cells(lines[-1])[0] == "plain (<1/n) and a < b"  # harmless text left as it reads


def test_a_markdown_renderer_sees_text_not_html() -> None:
    import markdown_it  # installed with the stack extra (rich)
    table = markdown_table(["query", "tag"], [[text, "x|y"] for text in HOSTILE])
    rendered = markdown_it.MarkdownIt("commonmark").enable("table").render(table)  # html allowed, as GitHub's
    parser = _Elements()
    parser.feed(rendered)
    assert parser.tags.count("tr") == len(HOSTILE) + 1
    assert parser.tags.count("td") == 2 * len(HOSTILE)
    assert not {"script", "img", "a"} & set(parser.tags)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rendered
    assert parser.cells[0] == "a | b" and parser.cells[1] == "x|y"
    assert "back\\slash \\| and \\<b>" in parser.cells  # the text round-trips exactly


class _Elements(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.tags.append(tag)
        if tag == "td":
            self._in_td = True
            self.cells.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in_td = False

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self.cells[-1] += data


@pytest.mark.parametrize("text", HOSTILE)
def test_escape_cell_is_one_line_without_raw_markup(text: str) -> None:
    cell = escape_cell(text)
    assert "\n" not in cell and "\r" not in cell and "\x1b" not in cell
    assert not re.search(r"(?<!\\)\|", cell.replace("\\\\", ""))
    assert not re.search(r"(?<!\\)<[A-Za-z/!?]", cell.replace("\\\\", ""))


HOSTILE_TAG = "a|b <script>alert('tag')</script>\nsecond line"
HOSTILE_QUESTION = "why <script>alert('q')</script> | does it squeal?"


def test_hostile_text_from_a_golden_set_stays_text_in_the_terminal_table_and_the_html(baselined: TrustProject) -> None:
    records = [dict(r) for r in baselined.records]
    records[0]["tags"] = [HOSTILE_TAG]
    records[2]["question"] = HOSTILE_QUESTION
    baselined.answers["q-003"] = ["noise-doc"]  # fails, so the question reaches the worst-N list too
    baselined.golden(records)
    result = baselined.run("--rag-accept-mismatch", "--rag-html", "report.html", "--rag-report", "run.json")
    summary = rag_summary(result)
    table = [line for line in summary.splitlines() if line.startswith("| ") and "alert('tag')" in line]
    assert len(table) == 1, summary  # the tag's row did not break into two lines
    header = next(line for line in summary.splitlines() if line.startswith("| tag "))
    assert len(_cells(table[0])) == len(_cells(header))
    assert r"a\|b \<script>alert('tag')\</script> second line" in table[0]
    page = (baselined.path / "report.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;q&#x27;)&lt;/script&gt;" in page
    assert json.loads((baselined.path / "run.json").read_text())["per_query"]["q-001"]["tags"] == [HOSTILE_TAG]


def test_hostile_query_ids_stay_text_in_the_cli_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = tmp_path / "qrels.tsv", tmp_path / "run.txt"
    qrels.write_text("q|<script>1 d 1\nplain d 1\n", encoding="utf-8")
    run.write_text("q|<script>1 Q0 d 1 1.0 s\nplain Q0 d 1 1.0 s\n", encoding="utf-8")
    assert main(["evaluate", "--qrels", str(qrels), "--run", str(run), "--per-query", "-m", "recall@5"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "script" in line)
    assert _cells(row) == [r"q\|\<script>1", "1.0000"]


# ------------------------------------------------------- no forged or reversed terminal lines

#: What must never reach a terminal raw: C0 and C1 controls (newline aside, the line separator
#: itself), the Unicode line and paragraph separators, bidi embeddings, overrides, isolates and marks.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
FORGED = "All gates passed (4 checked)."


@pytest.mark.parametrize("ci", ["", "true"], ids=["terminal", "ci"])
def test_ids_and_texts_cannot_forge_or_reverse_a_terminal_line(project: TrustProject, monkeypatch: pytest.MonkeyPatch,
                                                               ci: str) -> None:
    """A query id with a line break printed a fake "All gates passed" line under RETRIEVAL GATE
    FAILED, and U+202E turned a FAILED line around: ids, questions, returned document ids and
    error messages are shown escaped, in the summary, the items' failures and pytest's own lines
    (on CI pytest's short summary prints an error message whole, not its first line)."""
    monkeypatch.setenv("CI", ci) if ci else monkeypatch.delenv("CI", raising=False)
    newline_id, bidi_id = "q1\n" + FORGED, "q2\u202edeliaf"
    records = [dict(r) for r in project.records]
    records[0]["id"], records[1]["id"] = newline_id, bidi_id
    records[1]["question"] = "how often should the \u2067chain\u2069 be lubricated\u200f"
    project.answers[newline_id], project.answers[bidi_id] = GOOD["q-001"], GOOD["q-002"]
    project.golden(records)
    first = project.run("--rag-update-baseline")
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()[-3000:]
    project.answers[newline_id] = ["noise-doc"]
    project.answers[bidi_id] = ["noise\u202ecod", "other\n" + FORGED, "nel\x85doc", "chain-lube"]
    project.answers["q-003"] = {"raise": "index offline\n" + FORGED}
    project.golden(records)
    result = project.run()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for run in (first, result):
        out = run.stdout.str() + run.stderr.str()
        assert not RAW_CONTROL.search(out), [line for line in out.splitlines() if RAW_CONTROL.search(line)]
        assert not [line for line in out.splitlines() if line.strip().startswith(FORGED)], out[-3000:]
    summary = rag_summary(result)
    assert summary.startswith("RETRIEVAL GATE FAILED")
    assert "q1\\nAll gates passed (4 checked)." in summary and "q2\\u202edeliaf" in summary
    assert "noise\\u202ecod" in summary and "nel\\x85doc" in summary and "other\\nAll gates passed" in summary
    assert "ERROR: RuntimeError: index offline\\nAll gates passed" in summary
    assert "FAILED golden.yaml::q1\\nAll gates passed (4 checked)." in result.stdout.str()


def test_a_query_with_a_hostile_id_whose_setup_failed_is_counted_as_errored(baselined: TrustProject) -> None:
    """Items are named with the id as shown; a failed setup is mapped back to its query all the same."""
    bidi_id = "q3\u202e"
    records = [dict(r) for r in baselined.records]
    records[2]["id"] = bidi_id
    baselined.answers[bidi_id] = GOOD["q-003"]
    baselined.golden(records)
    (baselined.path / "conftest.py").write_text(baselined.conftest_text + '''

@pytest.fixture(autouse=True)
def _disk(request):
    if request.node.name.startswith("q3"):
        raise RuntimeError("disk full")
''', encoding="utf-8")
    result = baselined.run("--rag-accept-mismatch", "--rag-report", "run.json")
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and not RAW_CONTROL.search(out), out[-3000:]
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "ERROR golden.yaml::q3\\u202e" in result.stdout.str()
    record = json.loads((baselined.path / "run.json").read_text())["per_query"][bidi_id]
    assert record["status"] == "error" and "setup failed: RuntimeError: disk full" in record["error"]


def test_a_refused_refresh_names_hostile_ids_escaped(project: TrustProject) -> None:
    newline_id = "q1\n" + FORGED
    records = [dict(r) for r in project.records]
    records[0]["id"] = newline_id
    project.answers[newline_id] = GOOD["q-001"]
    project.golden(records)
    result = project.run("--rag-update-baseline", "-k", "q-002")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "q1\\nAll gates passed (4 checked)." in rag_summary(result)
    assert not [line for line in out.splitlines() if line.strip().startswith(FORGED)], out[-3000:]


# ------------------------------------------------------------------------ no network

@pytest.mark.slow
def test_the_demo_gate_runs_with_no_network(demo_cold: DemoRun, tmp_path: Path) -> None:
    """`pytest --rag-eval` at the repository root, cold (fresh index and embedding cache),
    inside a network namespace with only a down loopback (unshare -n), with a socket guard
    that records any attempt. It must pass, and nothing may even try to connect.

    That session is the test run's one cold demo run (``demo_cold``, tests/demo_run.py),
    which runs so isolated for every test that checks it; here, that the isolation holds."""
    prefix = demo_cold.isolation
    log = tmp_path / "network.log"
    env = guarded_env(tmp_path, tmp_path / "home", log)
    if prefix:  # the namespace really has no way out
        probe = subprocess.run([*prefix, sys.executable, "-c",
                                "import socket; s = socket.socket(); s.settimeout(5); s.connect(('1.1.1.1', 53))"],
                               capture_output=True, text=True, env={**env, "PYTHONPATH": ""}, timeout=60)
        assert probe.returncode != 0 and "unreachable" in probe.stderr.lower(), probe.stderr
    # and the guard is live in the child: an attempt is recorded and refused
    probe = subprocess.run([sys.executable, "-c", "import socket; socket.create_connection(('example.org', 80), 5)"],
                           capture_output=True, text=True, env=env, timeout=60)
    assert probe.returncode != 0 and log.read_text() == "getaddrinfo 'example.org'\n", probe.stderr
    proc = demo_cold
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "All gates passed" in proc.stdout
    assert json.loads(demo_cold.report.read_text())["comparison"]["passed"] is True
    attempts = demo_cold.network_log
    assert attempts == "", f"network attempts:\n{attempts}"
    if not prefix:
        pytest.skip("no network namespace here (unshare unavailable): only the socket guard applied")


def test_a_corpus_symlink_out_of_the_folder_is_skipped_with_a_warning(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``host.md -> /etc/hostname`` must not become a document the annotation page serves."""
    secret = tmp_path / "private" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("SECRET token\n", encoding="utf-8")
    corpus = tmp_path / "corpus"
    (corpus / "sub").mkdir(parents=True)
    (corpus / "brakes.md").write_text("# Brakes\nSqueeze the lever.\n", encoding="utf-8")
    (corpus / "host.md").symlink_to(secret)
    (corpus / "sub" / "up.md").symlink_to("../../private/secret.txt")
    (corpus / "alias.md").symlink_to("brakes.md")  # inside the folder: kept
    (corpus / "linked").symlink_to(secret.parent, target_is_directory=True)
    (tmp_path / "questions.txt").write_text("q1\tHow do brakes work?\n", encoding="utf-8")
    (tmp_path / "run.trec").write_text("q1 Q0 brakes 1 3.0 r\nq1 Q0 host 2 2.0 r\nq1 Q0 sub/up 3 1.5 r\n"
                                       "q1 Q0 alias 4 1.0 r\n", encoding="utf-8")
    out = tmp_path / "candidates.jsonl"
    assert main(["pool", "--queries", str(tmp_path / "questions.txt"), "--run", str(tmp_path / "run.trec"),
                 "--corpus", str(corpus), "--out", str(out), "--seed", "1", "-q"]) == 0
    err = capsys.readouterr().err
    assert "SECRET" not in out.read_text(encoding="utf-8")
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, err
    assert f"skipped 2 symlink(s) to files outside the corpus folder: host.md -> {secret}, " \
           "sub/up.md -> ../../private/secret.txt" in warning[0]
    texts = {c["doc_id"]: c["text"] for c in json.loads(out.read_text(encoding="utf-8").splitlines()[1])["candidates"]}
    assert texts["alias"] == texts["brakes"] == "Brakes\nSqueeze the lever."
    assert texts["host"] is None and texts["sub/up"] is None  # not in the corpus: noted, never read
