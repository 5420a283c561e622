"""The family registry (docs/extending.md): one entry per graph family of the expression grammar
(paper 001 Table 9, App. F; docs/expressions.md). An entry says how the family is written, how
many nodes and ports an instance has, how to build it and which instances the finder tries at a
given (N, d). The parser (:mod:`topofinder.families.syntax`), the builder
(:mod:`topofinder.families.build`), ``score`` and ``search`` (:mod:`topofinder.finder.bases`)
all read this table: adding a family is one :func:`register` call.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Callable, Iterable

from topofinder.compute.cache import add_key_part
from topofinder.errors import TopofinderError
from topofinder.families.basic import (
    affine, bi_ring, circulant, complete, complete_bipartite, de_bruijn, directed_circulant,
    generalized_kautz, hamming, hypercube, kautz, torus, uni_ring,
)
from topofinder.families.catalog import affine_bases, catalog_topology
from topofinder.families.circulant_opt import best_circulant
from topofinder.families.distance_regular import (
    CATALOG_NAMES, catalog_sizes, distance_regular, distance_regular_by_size,
)
from topofinder.families.shifted_ring_dbt import double_binary_tree, shifted_ring
from topofinder.families.twisted_torus import twisted_torus
from topofinder.model.topology import MAX_NODES, Topology

#: Largest arc count (N·d) built: 16 bytes of numpy per arc, so 256 MB of arc arrays.
MAX_ARCS = 16_000_000
#: Largest line-graph iteration (past it a degree >= 2 base exceeds MAX_NODES anyway).
MAX_LINE_POWER = 64
#: A BiRing/UniRing far from the Moore bound is a base only while it is small; larger ones only
#: matter as BW-optimal fall-backs at the target itself (``at_target``).
RING_LIMIT = 64

#: argument kinds: ``(lo, hi)`` integers (hi None: any number); "set": (m, {a,...});
#: "qset": (m, q, {a,...}); "name": one raw catalog name or two integers; "none": no parentheses
Arguments = tuple | str


def _none(n: int, d: int, at_target: bool) -> list[str]:
    return []


@dataclass(frozen=True)
class Family:
    """One graph family. ``build(*args)`` → Topology; ``size(*args)`` → (N, d) without building
    (upper bounds for irregular families; None: the instance is small, build it to know);
    ``instances(N, d, at_target)`` → the expressions with N nodes and out-degree d that the
    finder scores as bases (``at_target``: the search's own (N, d)); ``normalise(args)`` →
    canonical arguments (e.g. C's generators a and m−a are one)."""

    name: str
    signature: str
    arguments: Arguments
    build: Callable[..., Topology]
    size: Callable[..., tuple[int, int] | None]
    instances: Callable[[int, int, bool], Iterable[str]] = _none
    normalise: Callable[[tuple], tuple] | None = None

    def text(self, args: tuple) -> str:
        """The canonical expression of the instance with these (normalised) arguments."""
        if self.arguments == "none":
            return self.name
        parts = [f"{{{','.join(map(str, a))}}}" if isinstance(a, tuple) else str(a)
                 for a in args]
        return f"{self.name}({','.join(parts)})"


FAMILIES: dict[str, Family] = {}


def register(family: Family) -> Family:
    """Add a family to the grammar, the builder and the finder; TopofinderError if the name is
    taken or is not an identifier."""
    if family.name in FAMILIES or family.name in RESERVED or not family.name.isidentifier():
        raise TopofinderError(f"cannot register family {family.name!r}: the name is taken "
                              f"or not an identifier")
    FAMILIES[family.name] = family
    return family


#: Names the grammar uses for operators (docs/expressions.md), never a family.
RESERVED = ("L", "Bi", "T", "x")


def fingerprint() -> str:
    """Names and builders of the registered families: part of every cache key and of the
    finder's per-process memos, so a family registered at run time is never missed."""
    return ";".join(f"{f.name}={f.build.__module__}.{f.build.__qualname__}"
                    for f in FAMILIES.values())


def accepted() -> str:
    """The families as users write them, for error messages."""
    return ", ".join(f.signature for f in FAMILIES.values())


def base_instances(n: int, d: int, at_target: bool = False) -> list[str]:
    """Every registered family's instances with n nodes and out-degree d, in registry order."""
    return [expr for f in FAMILIES.values() for expr in f.instances(n, d, at_target)]


def capped_pow(base: int, exp: int) -> int:
    """base**exp, but stops growing once past the node limit (so 2**10**9 is instant)."""
    if base <= 1:
        return base ** min(exp, 1)
    result = 1
    for _ in range(exp):
        result *= base
        if result > MAX_NODES * MAX_ARCS:
            return result
    return result


def integer_log(n: int, base: int) -> int | None:
    """e with base**e == n, else None."""
    e, p = 0, 1
    while p < n:
        p *= base
        e += 1
    return e if p == n else None


# ---- the built-in families -----------------------------------------------------------------
def _complete(*a: int) -> Topology:
    return complete(a[0]) if len(a) == 1 else complete_bipartite(*a)


def _complete_instances(n: int, d: int, at_target: bool) -> list[str]:
    return ([f"K({n})"] if d == n - 1 else []) + ([f"K({d},{d})"] if n == 2 * d else [])


def _hamming_instances(n: int, d: int, at_target: bool) -> list[str]:
    out = []
    for e in range(2, d + 1):                        # H(e, q): q^e nodes, e(q-1) ports
        q = d // e + 1
        if d % e == 0 and q ** e == n:
            out.append(f"H({e},{q})")
    return out


def _kautz_size(d: int, n: int) -> tuple[int, int]:
    if n > MAX_LINE_POWER:
        raise TopofinderError(f"Kautz(d,n) = L^n(K(d+1)) needs n <= {MAX_LINE_POWER}, got "
                              f"n = {n}")
    return capped_pow(d, n) * (d + 1), d


def _kautz_instances(n: int, d: int, at_target: bool) -> list[str]:
    if d < 2 or n % (d + 1):
        return []
    e = integer_log(n // (d + 1), d)
    return [f"Kautz({d},{e})"] if e is not None and e >= 1 else []


def _hypercube_instances(n: int, d: int, at_target: bool) -> list[str]:
    return [f"Hypercube({d})"] if d >= 2 and integer_log(n, 2) == d else []


def _de_bruijn_instances(n: int, d: int, at_target: bool) -> list[str]:
    e = integer_log(n, d) if d >= 2 else None
    return [f"DBJ({d},{e})"] if e is not None and e >= 2 else []


def _circulant_normalise(args: tuple) -> tuple:
    m, gens = args                                   # a and m−a give the same bidirectional arcs
    return m, tuple(sorted(min(a, m - a) if 0 < a < m else a for a in gens))


def _best_circulant_instances(n: int, d: int, at_target: bool) -> list[str]:
    return [best_circulant(n, d).expr] if d % 2 == 0 and n >= 3 else []


def _dense_circulant_instances(n: int, d: int, at_target: bool) -> list[str]:
    """DC(n, {1..n-2}): the complete digraph minus one perfect matching of arcs."""
    return [f"DC({n},{{{','.join(map(str, range(1, n - 1)))}}})"] if n >= 3 and d == n - 2 \
        else []


def _distance_regular(*a) -> Topology:
    try:
        return distance_regular_by_size(*a) if len(a) == 2 else distance_regular(a[0])
    except KeyError:
        raise TopofinderError(f"DistReg({','.join(map(str, a))}) is not in the catalog; "
                              f"accepted names: {', '.join(CATALOG_NAMES)}") from None


def _twisted_torus_instances(n: int, d: int, at_target: bool) -> list[str]:
    """TwistedTorus(2a, a, ..., a): N = 2a^(d/2), d >= 4 even."""
    if d < 4 or d % 2:
        return []
    dims = d // 2
    a = round((n / 2) ** (1 / dims))
    return [f"TwistedTorus({','.join(map(str, [2 * c] + [c] * (dims - 1)))})"
            for c in (a - 1, a, a + 1) if c >= 2 and 2 * c ** dims == n]


def _catalog_graph(text: str) -> Callable[..., Topology]:
    """A builder reading a search-found catalog entry (its canonical text from the arguments)."""
    def build(*a) -> Topology:
        key = text if not a else f"{text}({','.join(map(str, a))})"
        try:
            return catalog_topology(key)
        except KeyError:
            raise TopofinderError(f"{key} is not in the catalog of search-found bases") from None
    return build


def _ring_instances(name: str, even_only: bool, always: int) -> Callable:
    def instances(n: int, d: int, at_target: bool) -> list[str]:
        if (even_only and d % 2) or not (at_target or n <= RING_LIMIT or d == always):
            return []
        return [f"{name}({d},{n})"]
    return instances


def _register_builtins() -> None:
    def ports(a: tuple) -> tuple[int, int]:
        return a[1], a[0]

    for family in (
        Family("K", "K(m) or K(d,d)", (1, 2), _complete,
               lambda *a: (a[0], a[0] - 1) if len(a) == 1 else (2 * a[0], a[0]),
               _complete_instances),
        Family("H", "H(n,q)", (2, 2), hamming,
               lambda n, q: (capped_pow(q, n), n * (q - 1)), _hamming_instances),
        Family("Kautz", "Kautz(d,n)", (2, 2), kautz, _kautz_size, _kautz_instances),
        Family("Pi", "Pi(d,m)", (2, 2), generalized_kautz, lambda *a: ports(a),
               lambda n, d, t: [f"Pi({d},{n})"] if d >= 2 and n >= d + 1 else []),
        Family("C", "C(m,{a,...})", "set", lambda m, g: circulant(m, list(g)),
               lambda m, g: (m, 2 * len(g)), _best_circulant_instances, _circulant_normalise),
        Family("DC", "DC(m,{a,...})", "set", lambda m, g: directed_circulant(m, list(g)),
               lambda m, g: (m, len(g)), _dense_circulant_instances,
               lambda a: (a[0], tuple(sorted(a[1])))),
        Family("Aff", "Aff(m,q,{a,...})", "qset", lambda m, q, g: affine(m, q, list(g)),
               lambda m, q, g: (m, len(g)), lambda n, d, t: affine_bases().get((n, d), []),
               lambda a: (a[0], a[1], tuple(sorted(a[2])))),
        Family("BiRing", "BiRing(d,m)", (2, 2), bi_ring, lambda *a: ports(a),
               _ring_instances("BiRing", True, 2)),
        Family("UniRing", "UniRing(d,m)", (2, 2), uni_ring, lambda *a: ports(a),
               _ring_instances("UniRing", False, 1)),
        Family("Torus", "Torus(m1,...,mk)", (1, None), torus, lambda *a: (prod(a), 2 * len(a))),
        Family("TwistedTorus", "TwistedTorus(2a,a,...)", (2, None), twisted_torus,
               lambda *a: (prod(a), 2 * len(a)), _twisted_torus_instances),
        Family("Hypercube", "Hypercube(n)", (1, 1), hypercube, lambda n: (capped_pow(2, n), n),
               _hypercube_instances),
        Family("DBJ", "DBJ(d,n)", (2, 2), de_bruijn, lambda d, n: (capped_pow(d, n), d),
               _de_bruijn_instances),
        Family("DBJMod", "DBJMod(d,n)", (2, 2), _catalog_graph("DBJMod"),
               lambda d, n: (capped_pow(d, n), d)),
        Family("DistReg", "DistReg(name) or DistReg(d,N)", "name", _distance_regular,
               lambda *a: (a[1], a[0]) if len(a) == 2 else None,
               lambda n, d, t: [f"DistReg({d},{n})"] if (d, n) in catalog_sizes() else []),
        Family("Diamond", "Diamond", "none", _catalog_graph("Diamond"), lambda: None),
        Family("ShiftedRing", "ShiftedRing(d,m)", (2, 2), shifted_ring, lambda *a: ports(a)),
        Family("DBT", "DBT(m)", (1, 1), double_binary_tree, lambda m: (m, 4)),
    ):
        register(family)


_register_builtins()
add_key_part(fingerprint)
