"""The gates, declared once: each is a class in a module of :mod:`pytest_ragmetrics.gate.gates` that
registers itself here with its name, the thresholds keys it reads, when it applies and how it judges.

Everything else reads this registry: which gate items a run collects (:func:`gate_names`), the
judging of a run (:func:`judge_gates`, called by :func:`pytest_ragmetrics.gate.verdict.judge_run`
for the plugin, ``compare``, ``merge`` and ``history`` alike) and the gate table of the docs. A
gate's outcome is data (:class:`Outcome`); its sentence is written by the gate's own ``describe``,
so the terminal, the Markdown, the HTML, JUnit and the artifact say the same thing.

To add a gate: one module in ``gate/gates/`` with a :class:`GateSpec` subclass decorated with
:func:`register`, its import in ``gate/gates/__init__.py``, its keys in the thresholds file's
reader when it reads new ones, and a row in the docs (CONTRIBUTING.md has the recipe).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

if TYPE_CHECKING:
    from pytest_ragmetrics.gate.inputs import GatePlan, RunInputs
    from pytest_ragmetrics.gate.verdict import Verdict

__all__ = ["Outcome", "GateSpec", "ThresholdKey", "register", "registered", "gate_names", "judge_gates",
           "gate_table"]


@dataclass(frozen=True)
class ThresholdKey:
    """A thresholds.json key a gate reads: its spelling (``<metric>`` stands for any measured
    metric), the values it takes and what it does, for the docs' gate table."""

    key: str
    values: str
    help: str


@dataclass
class Outcome:
    """One gate's judgment of a run, as data.

    ``name`` is the gate item's name (``recall@10`` for a metric's gate), ``kind`` the gate that
    judged (``metric``); ``metric``, ``before``, ``after`` and ``limit`` say what was compared when
    one number was, and ``queries`` the queries behind the outcome. ``message`` is the gate's own
    sentence for it; ``strict`` outcomes fail the run in report-only mode too.
    """

    name: str
    passed: bool
    message: str
    kind: str = ""
    metric: str | None = None
    before: float | None = None
    after: float | None = None
    limit: float | None = None
    queries: list[str] = field(default_factory=list)
    strict: bool = False

    def __post_init__(self) -> None:
        if not self.kind:
            self.kind = self.name

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GateSpec:
    """A gate: subclass it, set :attr:`kind` and :attr:`keys`, and write :meth:`names` and :meth:`judge`.

    :meth:`names` is what the gate adds to a run, known before any query runs (the gate items
    are collected from it); :meth:`judge` returns one :class:`Outcome` per name, in that order.
    """

    #: the gate's name; a gate with one item names the item so too
    kind: ClassVar[str] = ""
    #: the thresholds keys the gate reads
    keys: ClassVar[tuple[ThresholdKey, ...]] = ()
    #: one line for the docs' gate table: when the gate exists and what fails it
    summary: ClassVar[str] = ""
    #: a strict gate fails the run in report-only mode too (``fail_on_regression: false`` reports
    #: regressions; it does not excuse a run that judged nothing, or a leak)
    strict: ClassVar[bool] = False

    def names(self, plan: GatePlan) -> list[str]:
        """The gate items this gate adds to a run planned as ``plan`` (empty: it does not apply)."""
        return [self.kind]

    def judge(self, inputs: RunInputs, verdict: Verdict, name: str) -> Outcome:  # pragma: no cover - abstract
        raise NotImplementedError


_REGISTRY: list[GateSpec] = []


def register(cls: type[GateSpec]) -> type[GateSpec]:
    """Class decorator: add the gate to the registry, in import order (the order gates are reported)."""
    if not cls.kind:
        raise TypeError(f"{cls.__name__} sets no kind")
    if any(g.kind == cls.kind for g in _REGISTRY):
        raise TypeError(f"gate {cls.kind!r} is registered twice")
    _REGISTRY.append(cls())
    return cls


def registered() -> Sequence[GateSpec]:
    """Every gate, in the order a run reports them (``gate.gates.ORDER``)."""
    from pytest_ragmetrics.gate.gates import ORDER  # each module registers its gate on import

    unplaced = [g.kind for g in _REGISTRY if g.kind not in ORDER]
    if unplaced:
        raise TypeError(f"gate {unplaced[0]!r} has no place in pytest_ragmetrics.gate.gates.ORDER")
    return tuple(sorted(_REGISTRY, key=lambda g: ORDER.index(g.kind)))


def gate_names(plan: GatePlan) -> list[str]:
    """The gate items of a run planned as ``plan``, in the order they are reported."""
    return [name for gate in registered() for name in gate.names(plan)]


def judge_gates(inputs: RunInputs, verdict: Verdict) -> list[Outcome]:
    """Every gate's outcome for the run: exactly one per name of :func:`gate_names`, in that order."""
    plan = inputs.plan()
    outcomes = []
    for gate in registered():
        for name in gate.names(plan):
            outcome = gate.judge(inputs, verdict, name)
            if outcome.name != name or outcome.kind != gate.kind:
                raise AssertionError(f"gate {gate.kind} judged {outcome.name!r} ({outcome.kind}) for item {name!r}")
            outcome.strict = outcome.strict or gate.strict
            outcomes.append(outcome)
    return outcomes


def gate_table() -> str:
    """The docs' table of gates (docs/configuration.md, "The gates"), made from the registry."""
    rows = ["| gate | when it exists, and what fails it | thresholds keys |", "|---|---|---|"]
    for gate in registered():
        name = "`<metric>`" if gate.kind == "metric" else f"`{gate.kind}`"
        keys = ", ".join(f"`{k.key}`" for k in gate.keys) or "none"
        strict = "; fails in report-only mode too" if gate.strict else ""
        rows.append(f"| {name} | {gate.summary}{strict} | {keys} |")
    return "\n".join(rows)
