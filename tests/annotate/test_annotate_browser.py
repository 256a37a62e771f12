"""The annotation page in a real headless Chromium, driven by keys and clicks through Playwright.

Playwright drives the system's Chromium (Debian's ``chromium``, which .ci/run installs;
``playwright install`` and its downloaded browsers are never used). On a machine
without Chromium or the ``playwright`` package these tests skip with the reason;
under ``RAGMETRICS_REQUIRE_ALL=1`` (CI) such a skip fails. Every page records its
requests (anything not addressed to the server is aborted and fails the test),
dialogs, console errors and uncaught exceptions; each test ends with none of them.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import QUESTIONS, Cli, write_pool

from pytest_ragmetrics.annotate import Task
from pytest_ragmetrics.annotate.judgments import KIND, read_judgments
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.tools.candidates import read_candidates

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                                                 "(pip install -e '.[dev]')")
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        pytest.skip("headless Chromium is not installed here (.ci/run installs Debian's chromium)")
    sync_api.expect.set_options(timeout=15_000)  # two busy cores: be patient, never flaky
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@dataclass
class Watched:
    """A page and everything it did that a test must check."""

    page: Any
    origin: str
    requests: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def expect(self, selector: str) -> Any:
        from playwright.sync_api import expect

        return expect(self.page.locator(selector))

    def clean(self) -> None:
        assert self.foreign == [] and self.dialogs == [] and self.errors == []
        assert self.requests and all(url.startswith(self.origin) for url in self.requests)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Callable[[str], Watched]]:
    contexts: list[Any] = []
    watched: list[Watched] = []

    def open_(url: str) -> Watched:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        w = Watched(page, url.rstrip("/"))

        def route(r: Any) -> None:
            if r.request.url.startswith(w.origin + "/"):
                r.continue_()
            else:  # never let it out; the test fails on it
                w.foreign.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        page.on("request", lambda request: w.requests.append(request.url))
        page.on("dialog", lambda dialog: (w.dialogs.append(dialog.message), dialog.dismiss()))
        page.on("console", lambda m: w.errors.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning")
                else None)
        page.on("pageerror", lambda exc: w.errors.append(f"uncaught: {exc}"))
        page.goto(url)
        page.wait_for_selector("body[data-ready='1']")
        watched.append(w)
        return w

    yield open_
    for context in contexts:
        context.close()


def file_pairs(path: Path, pool: Path) -> dict[tuple[str, str], tuple[int, str]]:
    return {k: (j.rel, j.note) for k, j in read_judgments(path, read_candidates(pool)).pairs().items()}


def tag_row(w: Watched, tag: str) -> list[str]:
    return [cell.strip() for cell in w.page.locator(f'#progress-tags tr[data-tag="{tag}"] td').all_text_contents()]


def test_grading_with_keys_and_clicks_notes_navigation_skip_and_progress(
        make_task: Callable[..., Task], serve: Callable[[Task], Any], open_page: Callable[[str], Watched],
        pool_path: Path) -> None:
    server = serve(make_task())
    out = server.task.store.path
    w = open_page(server.url)
    page = w.page
    w.expect("#position").to_have_text("Question 1 of 3")
    assert page.locator("article.cand").evaluate_all("cs => cs.map(c => c.dataset.doc)") == ["b", "a", "c"]
    w.expect("article.cand.focus").to_have_attribute("data-doc", "b")
    w.expect("#guidelines").to_contain_text("2 – fully answers")

    for key in "120":  # b, a, c in display order; each grade moves to the next candidate
        page.keyboard.press(key)
    w.expect("#progress-total").to_contain_text("candidates judged: 3 / 7 · questions complete: 1 / 3")
    assert file_pairs(out, pool_path) == {("q1", "b"): (1, ""), ("q1", "a"): (2, ""), ("q1", "c"): (0, "")}
    assert tag_row(w, "smoke") == ["smoke", "1 / 2", "3 / 5"]
    assert tag_row(w, "standard") == ["standard", "1 / 1", "3 / 3"]
    assert tag_row(w, "hard") == ["hard", "0 / 1", "0 / 2"]
    w.expect('article[data-doc="a"] button[data-rel="2"]').to_have_attribute("aria-pressed", "true")

    w.expect("article.cand.focus").to_have_attribute("data-doc", "c")  # the last grade stays on the last one
    page.keyboard.press("k")  # back up to a, write a note with e, leave it with Esc
    w.expect("article.cand.focus").to_have_attribute("data-doc", "a")
    page.keyboard.press("e")
    page.keyboard.type("needs the bleed kit")
    page.keyboard.press("Escape")
    w.expect("#status").to_have_text("Note on #2 saved.")
    assert file_pairs(out, pool_path)[("q1", "a")] == (2, "needs the bleed kit")

    page.keyboard.press("n")  # next question; grade d with a click
    w.expect("#position").to_have_text("Question 2 of 3")
    page.locator('article[data-doc="d"] button[data-rel="1"]').click()
    w.expect("#progress-total").to_contain_text("candidates judged: 4 / 7")
    assert tag_row(w, "smoke") == ["smoke", "1 / 2", "4 / 5"]

    page.locator("#prev").click()  # previous shows what was judged
    w.expect("#position").to_have_text("Question 1 of 3")
    w.expect('article[data-doc="b"] button[data-rel="1"]').to_have_attribute("aria-pressed", "true")
    w.expect('article[data-doc="a"] textarea').to_have_value("needs the bleed kit")
    page.keyboard.press("ArrowRight")
    w.expect("#position").to_have_text("Question 2 of 3")
    w.expect("article.cand.focus").to_have_attribute("data-doc", "e")  # the first one not judged

    page.keyboard.press("s")  # skip q2: on to the next question not fully judged
    w.expect("#position").to_have_text("Question 3 of 3")
    page.locator("#skip").click()  # q3 skipped too: back round to q2
    w.expect("#position").to_have_text("Question 2 of 3")
    w.expect("#progress-total").to_contain_text("skipped: 2")

    page.keyboard.press("j")  # d, judged: withdraw it
    w.expect("article.cand.focus").to_have_attribute("data-doc", "d")
    page.keyboard.press("Delete")
    w.expect("#progress-total").to_contain_text("candidates judged: 3 / 7")
    assert ("q2", "d") not in file_pairs(out, pool_path)

    page.keyboard.press("p")
    w.expect("#position").to_have_text("Question 1 of 3")
    page.locator("#next").click()
    w.expect("#position").to_have_text("Question 2 of 3")
    page.locator("#jump").select_option("2")
    w.expect("#position").to_have_text("Question 3 of 3")
    page.locator("#prev").click()
    w.expect("#position").to_have_text("Question 2 of 3")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "annotate.png"), full_page=True)  # for a person to look at
    w.clean()


def test_the_watch_sees_dialogs_errors_and_blocked_loads(
        make_task: Callable[..., Task], serve: Callable[[Task], Any], open_page: Callable[[str], Watched]) -> None:
    """Control: the checks every test ends with are not vacuous, and the page's policy blocks
    inline script and foreign images even if something were ever inserted as markup."""
    w = open_page(serve(make_task()).url)
    w.page.evaluate("""() => {
        const s = document.createElement('script'); s.textContent = 'alert("inline")'; document.body.append(s);
        const i = document.createElement('img'); i.src = 'http://example.invalid/p.png'; document.body.append(i);
        fetch('https://example.invalid/x').catch(() => {});
    }""")
    w.page.wait_for_timeout(500)
    assert w.dialogs == []  # the inline script never ran
    assert any("Content Security Policy" in e for e in w.errors)
    assert "http://example.invalid/p.png" in w.requests  # the watch sees the attempt ...
    assert w.foreign == []  # ... which the policy stopped before it reached the network
    w.page.evaluate("() => { console.error('boom'); window.alert('hi'); }")
    assert w.dialogs == ["hi"] and any("boom" in e for e in w.errors)
    with pytest.raises(AssertionError):
        w.clean()


def test_a_question_without_candidates_says_so_and_keys_do_no_harm(
        tmp_path: Path, serve: Callable[[Task], Any], open_page: Callable[[str], Watched]) -> None:
    from pytest_ragmetrics.annotate import JudgmentStore, shown_questions

    pool = read_candidates(write_pool(tmp_path / "pool.jsonl", [
        {"qid": "empty", "query": "nothing pooled", "candidates": []}, QUESTIONS[2]]))
    store = JudgmentStore.open(tmp_path / "out.jsonl", pool, annotator="alice", candidates_label="pool.jsonl",
                               guidelines_sha256="g")
    w = open_page(serve(Task(shown_questions(pool), store, "rules")).url)
    w.expect("#position").to_have_text("Question 2 of 2")  # the empty one counts as complete
    w.page.keyboard.press("p")
    w.expect("#candidates").to_have_text("No candidate to judge here.")
    for key in ("2", "e", "Delete", "j", "k"):
        w.page.keyboard.press(key)
    w.page.keyboard.press("n")
    w.expect("#position").to_have_text("Question 2 of 2")
    assert not store.path.exists()
    w.clean()


HOSTILE = [
    '<script>alert("script")</script>',
    '<img src=x onerror="alert(\'img\')">',
    '</textarea><script>alert("textarea")</script>',
    '"double" \'single\' `back` &amp; &lt;b&gt;',
    "مرحبا بالعالم \u202etxet desrever\u202c עברית",
    '<img src="http://example.invalid/pixel.png"><link rel=stylesheet href="https://cdn.example/x.css">'
    '<iframe src="//example.org/"></iframe><style>@import "https://cdn.example/y.css";</style>',
    "x" * 200_000,
]


def test_hostile_text_is_shown_literally_and_nothing_fires_or_leaves(
        tmp_path: Path, serve: Callable[[Task], Any], open_page: Callable[[str], Watched]) -> None:
    from pytest_ragmetrics.annotate import JudgmentStore, shown_questions

    questions = [{"qid": "<b>q</b>", "query": HOSTILE[0] + " " + HOSTILE[4], "tags": ['<i onmouseover="alert(1)">t'],
                  "candidates": [{"doc_id": f'<img src=x onerror="alert({i})">{i}', "text": text}
                                 for i, text in enumerate(HOSTILE)]}]
    pool_path = write_pool(tmp_path / "pool.jsonl", questions)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"doc_id": c["doc_id"], "title": HOSTILE[1], "text": "unused"}) + "\n"
                              for c in questions[0]["candidates"]), encoding="utf-8")
    guidelines = HOSTILE[2] + "\n\n" + HOSTILE[5]
    pool = read_candidates(pool_path)
    store = JudgmentStore.open(tmp_path / "out.jsonl", pool, annotator="alice", candidates_label="pool.jsonl",
                               guidelines_sha256="g")
    server = serve(Task(shown_questions(pool, corpus), store, guidelines))
    w = open_page(server.url)
    page = w.page

    w.expect("#query").to_have_text(questions[0]["query"])
    w.expect("#guidelines").to_have_text(guidelines)
    w.expect("#qmeta .tag").to_have_text(questions[0]["tags"][0])
    texts = page.locator("article.cand .text").all_text_contents()
    order = pool.questions[0].order
    assert texts == [HOSTILE[int(doc.rsplit(">", 1)[1])] for doc in order]
    assert page.locator("article.cand .doc").all_text_contents() == order
    assert set(page.locator("article.cand .title").all_text_contents()) == {HOSTILE[1]}
    assert page.locator("img, iframe, link[rel=stylesheet][href^='http'], main style").count() == 0
    assert page.locator("script").count() == 1  # the page's own

    note = HOSTILE[2] + " " + HOSTILE[4]
    page.keyboard.press("e")
    page.keyboard.insert_text(note)
    page.keyboard.press("Escape")
    page.keyboard.press("2")
    w.expect("#progress-total").to_contain_text("1 / 7")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    w.expect(f'article[data-i="0"] textarea').to_have_value(note)
    assert read_judgments(store.path, pool).get("<b>q</b>", order[0]).note == note
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280 + 1  # a 200,000-character word wraps
    w.clean()


def test_kill_and_resume_through_the_command(pool_path: Path, open_page: Callable[[str], Watched]) -> None:
    out = pool_path.with_name("pool.alice.jsonl")
    cli = Cli(str(pool_path), "--annotator", "alice")
    try:
        w = open_page(cli.url)
        for key in "210":
            w.page.keyboard.press(key)
        w.page.keyboard.press("n")
        w.expect("#position").to_have_text("Question 2 of 3")
        w.page.keyboard.press("1")  # e
        w.expect("#progress-total").to_contain_text("candidates judged: 4 / 7")
        w.clean()
    finally:
        cli.kill()  # SIGKILL: no chance to tidy up
    assert cli.proc.returncode == -9
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line).get("qid") for line in lines] == [None, "q1", "q2"]  # valid JSONL, whole lines
    assert json.loads(lines[0])["_meta"]["kind"] == KIND
    assert file_pairs(out, pool_path) == {("q1", "b"): (2, ""), ("q1", "a"): (1, ""), ("q1", "c"): (0, ""),
                                          ("q2", "e"): (1, "")}
    assert load_golden(out)["q2"].judgments == {"e": 1}

    cli = Cli(str(pool_path), "--annotator", "alice")
    try:
        assert "2 of 3 questions and 3 of 7 candidates left" in "".join(cli.lines)
        w = open_page(cli.url)
        w.expect("#position").to_have_text("Question 2 of 3")  # the first question not fully judged
        w.expect("article.cand.focus").to_have_attribute("data-doc", "d")
        w.expect('article[data-doc="e"] button[data-rel="1"]').to_have_attribute("aria-pressed", "true")
        w.page.keyboard.press("2")
        w.expect("#progress-total").to_contain_text("candidates judged: 5 / 7 · questions complete: 2 / 3")
        w.clean()
        code, printed, _ = cli.stop()
    finally:
        cli.kill()
    assert code == 0 and f"The judgments are in {out}" in printed
    assert file_pairs(out, pool_path)[("q2", "d")] == (2, "")


def test_the_adjudication_view_resolves_disagreements(tmp_path: Path, pool_path: Path,
                                                      open_page: Callable[[str], Watched]) -> None:
    def annotator(name: str, grades: dict[tuple[str, str], tuple[int, str]]) -> Path:
        path = tmp_path / f"pool.{name}.jsonl"
        records: list[dict[str, Any]] = [{"_meta": {"kind": KIND, "annotator": name, "pool_id": "pool-1"}}]
        for q in QUESTIONS:
            docs = [{"doc_id": d, "rel": grades[(q["qid"], d)][0], "note": grades[(q["qid"], d)][1]}
                    for d in q["order"] if (q["qid"], d) in grades]
            if docs:
                records.append({"qid": q["qid"], "query": q["query"], "tags": q["tags"], "candidates": docs})
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        return path

    a = annotator("alice", {("q1", "a"): (2, ""), ("q1", "b"): (0, "about pads"), ("q2", "d"): (2, "")})
    b = annotator("bob", {("q1", "a"): (2, ""), ("q1", "b"): (1, "<b>pads</b> matter"), ("q2", "d"): (0, "")})
    adj = tmp_path / "adj.jsonl"
    cli = Cli(str(pool_path), "--adjudicate", str(a), str(b), "--out", str(adj))
    try:
        assert "1 agree (carried over), 2 disagree" in "".join(cli.lines)
        w = open_page(cli.url)
        w.expect("#title").to_have_text("Adjudication")
        w.expect("#position").to_have_text("Question 1 of 2")
        assert w.page.locator("article.cand").evaluate_all("cs => cs.map(c => c.dataset.doc)") == ["b"]
        sides = w.page.locator('article[data-doc="b"] .side').all_text_contents()
        assert sides == ["alice: 0 · not relevantabout pads", "bob: 1 · partially relevant<b>pads</b> matter"]
        w.page.locator('article[data-doc="b"] textarea').fill("pads are part of bleeding")
        w.page.locator('article[data-doc="b"] button[data-rel="1"]').click()
        w.expect("#progress-total").to_contain_text("disagreements resolved: 1 / 2")
        w.page.keyboard.press("n")
        w.expect("#position").to_have_text("Question 2 of 3".replace("3", "2"))
        w.page.keyboard.press("2")
        w.expect("#status").to_contain_text("All done")
        w.clean()
        code, _, _ = cli.stop()
    finally:
        cli.kill()
    assert code == 0
    result = read_judgments(adj, read_candidates(pool_path))
    assert result.annotator == "adjudicated(alice,bob)"
    assert {k: (j.rel, j.note) for k, j in result.pairs().items()} == {
        ("q1", "a"): (2, ""), ("q1", "b"): (1, "pads are part of bleeding"), ("q2", "d"): (2, "")}
