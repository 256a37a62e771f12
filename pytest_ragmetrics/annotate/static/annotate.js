// The annotation page. Every text from the data goes into the page as a text node
// (textContent, never parsed as markup), so a candidate holding markup shows that markup.
"use strict";

(function () {
  const TOKEN = document.querySelector('meta[name="ragmetrics-token"]').content;
  const $ = (id) => document.getElementById(id);

  let state = null;      // GET /api/state
  let question = null;   // GET /api/question?i=N
  let index = 0;         // the question shown
  let focus = 0;         // the highlighted candidate
  const skipped = new Set();

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child !== null && child !== undefined) node.append(child);  // strings become text nodes
    }
    return node;
  }

  function say(message, isError) {
    const status = $("status");
    status.textContent = message;
    status.className = isError ? "error" : "";
    status.setAttribute("role", isError ? "alert" : "status");
  }

  async function api(path, body) {
    const options = body === undefined ? {} : {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-Ragmetrics-Token": TOKEN},
      body: JSON.stringify(body),
    };
    const response = await fetch(path, Object.assign({credentials: "same-origin", cache: "no-store"}, options));
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) throw new Error((data && data.error) || ("HTTP " + response.status));
    return data;
  }

  function gradeLabel(rel) {
    if (rel === null || rel === undefined) return "not judged";
    const grade = state.grades.find((g) => g.value === rel);
    return rel + " · " + (grade ? grade.label : "");
  }

  // ------------------------------------------------------------------ progress

  function showProgress(progress) {
    state.progress = progress;
    const box = $("progress");
    box.textContent = "";
    const all = progress.total > 0 && progress.judged === progress.total;
    const what = state.mode === "adjudicate" ? "disagreements resolved" : "candidates judged";
    box.append(el("span", {id: "progress-total", class: all ? "done" : ""},
      `${what}: ${progress.judged} / ${progress.total} · questions complete: ` +
      `${progress.questions_done} / ${progress.questions}` + (skipped.size ? ` · skipped: ${skipped.size}` : "")));
    if (progress.tags.length) {
      const rows = progress.tags.map((t) => el("tr", {"data-tag": t.tag},
        el("td", {text: t.tag}),
        el("td", {class: "n", text: `${t.questions_done} / ${t.questions}`}),
        el("td", {class: "n", text: `${t.judged} / ${t.total}`})));
      box.append(el("table", {id: "progress-tags"},
        el("thead", {}, el("tr", {}, el("th", {text: "tag"}), el("th", {text: "questions complete"}),
          el("th", {text: state.mode === "adjudicate" ? "resolved" : "judged"}))),
        el("tbody", {}, ...rows)));
    }
    if (all) say(`All done: every ${state.mode === "adjudicate" ? "disagreement is resolved" : "candidate is judged"}. ` +
                 `The judgments are in ${state.out}.`, false);
  }

  function updateJump() {
    const jump = $("jump");
    jump.textContent = "";
    state.questions.forEach((q, i) => {
      const mark = q.judged === q.n ? "✓" : `${q.judged}/${q.n}` + (skipped.has(q.qid) ? ", skipped" : "");
      jump.append(new Option(`${i + 1}. ${q.qid} (${mark})`, String(i), false, i === index));
    });
  }

  // ------------------------------------------------------------------ question

  function candidateCard(c, i) {
    const card = el("article", {class: "cand", "data-doc": c.doc_id, "data-i": String(i)});
    card.append(el("header", {},
      el("span", {class: "num", text: `#${i + 1}`}),
      c.title ? el("span", {class: "title", dir: "auto", text: c.title}) : null,
      el("span", {class: "doc", text: c.doc_id})));
    card.append(el("div", {class: "text", dir: "auto", text: c.text}));
    if (c.a && c.b) {
      const side = (name, s) => el("div", {class: "side", dir: "auto"},
        el("b", {text: `${name}: ${gradeLabel(s.rel)}`}), s.note ? s.note : "");
      card.append(el("div", {class: "sides"}, side(state.sides[0], c.a), side(state.sides[1], c.b)));
    }
    const grades = el("div", {class: "grades", role: "group", "aria-label": "grade"});
    for (const g of state.grades) {
      const button = el("button", {type: "button", class: "grade", "data-rel": String(g.value),
                                   "aria-pressed": "false", text: `${g.value} · ${g.label}`});
      button.addEventListener("click", (event) => { event.stopPropagation(); setFocus(i); grade(i, g.value); });
      grades.append(button);
    }
    card.append(grades);
    const note = el("textarea", {class: "note", dir: "auto", maxlength: "4000", rows: "1",
                                 placeholder: state.mode === "adjudicate" ? "note on the final grade (e)" : "note (e)",
                                 "aria-label": "note"});
    note.value = c.note || "";
    note.addEventListener("change", () => saveNote(i));
    note.addEventListener("focus", () => setFocus(i, false));
    card.append(note);
    card.addEventListener("click", () => setFocus(i, false));
    paint(card, c);
    return card;
  }

  function paint(card, c) {
    card.classList.remove("judged", "g0", "g1", "g2");
    if (c.rel !== null && c.rel !== undefined) card.classList.add("judged", "g" + c.rel);
    for (const b of card.querySelectorAll("button.grade")) {
      b.setAttribute("aria-pressed", String(Number(b.dataset.rel) === c.rel));
    }
  }

  function cards() { return $("candidates").querySelectorAll("article.cand"); }

  function setFocus(i, scroll) {
    const all = cards();
    if (!all.length) return;
    focus = Math.max(0, Math.min(i, all.length - 1));
    all.forEach((card, k) => card.classList.toggle("focus", k === focus));
    if (scroll !== false) all[focus].scrollIntoView({block: "nearest"});
  }

  // Saves and loads run one after another, in the order they were asked for: a fast
  // typist's grades reach the file in the order given, and a question is read after them.
  let queue = Promise.resolve();
  function enqueue(work) {
    const next = queue.then(work, work);
    queue = next.catch(() => undefined);
    return next;
  }

  function show(i) {
    if (!state.questions.length) return Promise.resolve();
    const wanted = (i + state.questions.length) % state.questions.length;
    return enqueue(async () => {
      let loaded;
      try {
        loaded = await api(`/api/question?i=${wanted}`);
      } catch (e) {
        say(`Could not load question ${wanted + 1}: ${e.message}`, true);
        return;
      }
      index = wanted;
      question = loaded;
      if ($("status").className !== "error") say("", false);  // a message of the last question is done
      $("position").textContent = `Question ${index + 1} of ${state.questions.length}`;
      const meta = $("qmeta");
      meta.textContent = "";
      meta.append(el("span", {class: "doc", text: question.qid}),
                  ...question.tags.map((t) => el("span", {class: "tag", text: t})));
      $("query").textContent = question.query;
      const list = $("candidates");
      list.textContent = "";
      question.candidates.forEach((c, k) => list.append(candidateCard(c, k)));
      if (!question.candidates.length) list.append(el("p", {class: "meta", text: "No candidate to judge here."}));
      const open = question.candidates.findIndex((c) => c.rel === null);
      setFocus(open < 0 ? 0 : open, false);
      window.scrollTo(0, 0);
      updateJump();
      $("prev").disabled = state.questions.length < 2;
      $("next").disabled = state.questions.length < 2;
    });
  }

  // ------------------------------------------------------------------ judging

  async function send(q, i, rel, note) {
    const c = q.candidates[i];
    const result = await api("/api/judge", {qid: q.qid, doc_id: c.doc_id, rel: rel, note: note});
    c.rel = rel;
    c.note = note;
    if (q === question) paint(cards()[i], c);
    const entry = state.questions[result.index];
    entry.judged = result.judged;
    if (entry.judged === entry.n) skipped.delete(entry.qid);
    updateJump();
    showProgress(result.progress);
    return result;
  }

  function grade(i, rel) {
    const q = question;
    const note = cards()[i].querySelector("textarea").value;
    if (rel !== null && i + 1 < q.candidates.length) setFocus(i + 1);
    return enqueue(async () => {
      try {
        await send(q, i, rel, note);
      } catch (e) {
        say(`Not saved: ${e.message}`, true);
        return;
      }
      if (!$("status").textContent.startsWith("All done")) {
        say(rel === null ? `#${i + 1} withdrawn; saved.` : `#${i + 1} graded ${gradeLabel(rel)}; saved.`, false);
      }
    });
  }

  function saveNote(i) {
    const q = question;
    const c = q.candidates[i];
    const note = cards()[i].querySelector("textarea").value;
    return enqueue(async () => {
      if (c.rel === null || note === c.note) return;  // an ungraded note goes with its grade
      try {
        await send(q, i, c.rel, note);
        say(`Note on #${i + 1} saved.`, false);
      } catch (e) {
        say(`Note not saved: ${e.message}`, true);
      }
    });
  }

  function skip() {
    const n = state.questions.length;
    skipped.add(question.qid);
    showProgress(state.progress);
    for (let k = 1; k <= n; k++) {
      const j = (index + k) % n;
      const q = state.questions[j];
      if (q.judged < q.n && j !== index && !skipped.has(q.qid)) return show(j);
    }
    for (let k = 1; k <= n; k++) {  // only skipped ones left: go round them again
      const j = (index + k) % n;
      if (state.questions[j].judged < state.questions[j].n) return show(j);
    }
    return show(index + 1);
  }

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || !question) return;
    const target = event.target;
    if (target instanceof HTMLTextAreaElement || target instanceof HTMLInputElement ||
        target instanceof HTMLSelectElement) {
      if (event.key === "Escape") target.blur();
      return;
    }
    const key = event.key;
    const grades = state.grades.map((g) => String(g.value));
    const some = question.candidates.length > 0;
    let done = true;
    if (grades.includes(key)) { if (some) grade(focus, Number(key)); }
    else if (key === "j" || key === "ArrowDown") setFocus(focus + 1);
    else if (key === "k" || key === "ArrowUp") setFocus(focus - 1);
    else if (key === "n" || key === "ArrowRight") show(index + 1);
    else if (key === "p" || key === "ArrowLeft") show(index - 1);
    else if (key === "s") skip();
    else if (key === "e" || key === "Enter") { if (some) cards()[focus].querySelector("textarea").focus(); }
    else if (key === "Delete" || key === "Backspace") {
      if (some && question.candidates[focus].rel !== null) grade(focus, null);
    } else done = false;
    if (done) event.preventDefault();
  }

  async function start() {
    try {
      state = await api("/api/state");
    } catch (e) {
      say(`Could not load the task: ${e.message}`, true);
      return;
    }
    if (state.mode === "adjudicate") {
      $("title").textContent = "Adjudication";
      $("who").textContent = `${state.sides[0]} and ${state.sides[1]} disagree on these pairs; ` +
                             "choose the final grade. Agreements are carried over.";
    } else {
      $("who").textContent = `Annotator: ${state.annotator}`;
    }
    $("guidelines").textContent = state.guidelines;
    $("out").textContent = `Saved to ${state.out} at every grade.`;
    $("prev").addEventListener("click", () => show(index - 1));
    $("next").addEventListener("click", () => show(index + 1));
    $("skip").addEventListener("click", () => skip());
    $("jump").addEventListener("change", (event) => { show(Number(event.target.value)); event.target.blur(); });
    document.addEventListener("keydown", onKey);
    showProgress(state.progress);
    if (!state.questions.length) {
      say("Nothing to judge here.", false);
      return;
    }
    await show(state.start);
    document.body.dataset.ready = "1";
  }

  start();
})();
