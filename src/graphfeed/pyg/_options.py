"""PyG's sampling options, each honoured by :class:`~graphfeed.pyg.GraphfeedSampler` or refused
by name (issue 41): never accepted and dropped.

PyG's ``NeighborLoader`` and ``LinkNeighborLoader`` (2.4 to 2.8) hand their sampling options
(``num_neighbors``, ``replace``, ``subgraph_type``, ``disjoint``, ``temporal_strategy``,
``time_attr``, ``weight_attr``, ``is_sorted``, ``directed``) only to the ``NeighborSampler``
they build themselves; given ``neighbor_sampler=``, they drop them without a word. So
:func:`install_loader_checks` puts one check in front of those two loaders' ``__init__``
(installed when the first ``GraphfeedSampler`` is built, never at import; it acts only when
``neighbor_sampler`` is a ``GraphfeedSampler``, every other call goes to PyG untouched): an
option the caller gave the loader must agree with the sampler's, else a one-line
``GraphfeedError`` (a ``ValueError``) names it and says to pass it to ``GraphfeedSampler``.
What a loader does hand to its sampler (``input_nodes``, ``input_time``, ``edge_label_index``,
``edge_label``, ``edge_label_time``, ``neg_sampling``, ``neg_sampling_ratio``) and what it
does itself (``transform``, ``transform_sampler_output``, ``filter_per_worker``,
``custom_cls``, ``input_id``, the ``DataLoader`` keywords) need no check. ``HGTLoader`` builds
its own ``HGTSampler`` and takes none; ``NodeLoader``/``LinkLoader`` take a sampler and no
sampling options.
"""

from __future__ import annotations

import functools
import inspect
import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any, Optional

from ..errors import GraphfeedError, GraphfeedWarning
from ..sampling.method import TEMPORAL_STRATEGIES, SamplingMethod, resolve_method

__all__ = ["PygOptions", "SUBGRAPH_TYPES", "LOADER_SAMPLER_OPTIONS", "install_loader_checks",
           "check_loader_call", "resolve_subgraph_type", "pyg_method", "refuse_unsupported"]

SUBGRAPH_TYPES = ("directional", "bidirectional", "induced")
#: the options PyG's NeighborLoader/LinkNeighborLoader give only to a sampler they build
LOADER_SAMPLER_OPTIONS = ("num_neighbors", "replace", "subgraph_type", "disjoint",
                          "temporal_strategy", "time_attr", "weight_attr", "is_sorted",
                          "directed")


@dataclass(frozen=True)
class PygOptions:
    """The PyG sampling options a ``GraphfeedSampler`` samples with, as PyG's
    ``NeighborSampler`` names them (what a loader's own options are checked against)."""

    num_neighbors: Any
    replace: bool = False
    subgraph_type: str = "directional"
    disjoint: bool = False
    temporal_strategy: str = "uniform"
    time_attr: Optional[str] = None
    weight_attr: Optional[str] = None


def resolve_subgraph_type(subgraph_type, directed: bool, who: str = "GraphfeedSampler") -> str:
    """``subgraph_type`` as one of :data:`SUBGRAPH_TYPES` (a string or PyG's ``SubgraphType``);
    ``directed=False`` is PyG's deprecated spelling of ``"induced"`` (warned, as PyG does)."""
    value = getattr(subgraph_type, "value", subgraph_type)  # PyG's SubgraphType enum
    if value not in SUBGRAPH_TYPES:
        raise GraphfeedError(f"{who}: subgraph_type must be one of {', '.join(SUBGRAPH_TYPES)}, "
                             f"got {subgraph_type!r}")
    if not directed:
        if value not in ("directional", "induced"):
            raise GraphfeedError(f"{who}: directed=False means subgraph_type='induced' and "
                                 f"conflicts with subgraph_type={value!r}: give subgraph_type "
                                 f"alone")
        warnings.warn(f"{who}: directed=False is PyG's deprecated spelling of "
                      f"subgraph_type='induced'", GraphfeedWarning, stacklevel=3)
        value = "induced"
    return value


def refuse_unsupported(*, share_memory: bool, sample_direction: str,
                       who: str = "GraphfeedSampler") -> None:
    """The PyG ``NeighborSampler`` options graphfeed does not take, refused by name."""
    if share_memory:
        raise GraphfeedError(
            f"{who}: share_memory=True is not supported: DataLoader workers forked from this "
            f"process share the graph's arrays already (copy-on-write); drop the option")
    if sample_direction != "forward":
        raise GraphfeedError(
            f"{who}: sample_direction={sample_direction!r} is not supported (graphfeed samples "
            f"in-neighbours, 'forward'): build the sampler over the reversed graph instead")


def pyg_method(method, weight_attr: Optional[str], time_attr: Optional[str],
               temporal_strategy: Optional[str], who: str = "GraphfeedSampler"
               ) -> SamplingMethod:
    """The ``SamplingMethod`` of graphfeed's ``method`` and PyG's ``weight_attr``/``time_attr``/
    ``temporal_strategy``: ``weight_attr`` chooses ``"weighted"`` and ``time_attr``
    ``"temporal"`` when ``method`` is not given; a combination that would leave one of them
    unused is a ``GraphfeedError`` naming it."""
    if weight_attr and time_attr:
        raise GraphfeedError(f"{who}: weight_attr and time_attr together (weighted temporal "
                             f"sampling) are not supported: give one of them")
    given = method
    method = resolve_method(method if method is not None else
                            "weighted" if weight_attr else "temporal" if time_attr else None)
    for attr, value, kind in (("weight_attr", weight_attr, "weighted"),
                              ("time_attr", time_attr, "temporal")):
        if value and method.kind != kind:
            raise GraphfeedError(f"{who}: {attr}={value!r} needs method={kind!r}, not "
                                 f"{method.kind!r}: drop method or {attr}")
    if temporal_strategy is None:
        return method
    if temporal_strategy not in TEMPORAL_STRATEGIES:
        raise GraphfeedError(f"{who}: temporal_strategy must be one of "
                             f"{', '.join(TEMPORAL_STRATEGIES)}, got {temporal_strategy!r}")
    if method.kind != "temporal":
        if temporal_strategy == "uniform":  # PyG's default; uniform is what is sampled
            return method
        raise GraphfeedError(f"{who}: temporal_strategy={temporal_strategy!r} is for temporal "
                             f"sampling: give time_attr= (a Data's times) or method='temporal'")
    if isinstance(given, SamplingMethod) and given.strategy != temporal_strategy:
        raise GraphfeedError(f"{who}: temporal_strategy={temporal_strategy!r} conflicts with "
                             f"method's strategy {given.strategy!r}: give it in one place")
    return replace(method, strategy=temporal_strategy)


# ---------------------------------------------------------------------- PyG's loaders
def check_loader_call(loader: str, given: dict, sampler) -> None:
    """Refuse, naming it, every sampling option ``given`` to PyG's ``loader`` that would not
    reach its ``neighbor_sampler`` (a ``GraphfeedSampler``) and differs from the sampler's own;
    and a loader whose ``data`` is not the graph the sampler samples."""
    have: PygOptions = sampler.pyg_options
    for name in LOADER_SAMPLER_OPTIONS:
        if name not in given or name == "is_sorted":  # a promise about order: no batch changes
            continue
        value = given[name]
        if name == "num_neighbors":
            if not sampler.same_num_neighbors(value):
                raise GraphfeedError(
                    f"{loader}(num_neighbors={_shown(value)}) differs from its neighbor_sampler's "
                    f"num_neighbors={_shown(have.num_neighbors)}, and PyG would sample with the "
                    f"sampler's: give both the same")
            continue
        field, want = name, value
        if name == "directed":  # PyG's deprecated spelling: False is "induced"
            field, want = "subgraph_type", "induced" if not value else have.subgraph_type
        elif name == "subgraph_type":
            want = resolve_subgraph_type(value, True, loader)
        elif name in ("replace", "disjoint"):
            want = bool(value)
        if want != getattr(have, field):
            raise GraphfeedError(
                f"{loader}({name}={value!r}) does not reach its neighbor_sampler (PyG gives it "
                f"only to a sampler it builds), whose {field} is {getattr(have, field)!r}: pass "
                f"{field}={want!r} to GraphfeedSampler(...) instead")
    if "data" in given:
        sampler.check_data(given["data"], loader)


def _shown(v):
    values = getattr(v, "values", None)  # PyG's NumNeighbors
    return values if values is not None and not callable(values) else v


_lock = threading.Lock()
_installed = False
#: the sampler class whose loaders are checked (``GraphfeedSampler``, handed over by
#: :func:`install_loader_checks`: this module never imports the sampler's)
_sampler_cls: Optional[type] = None


def install_loader_checks(sampler_cls: type) -> None:
    """Put :func:`check_loader_call` in front of PyG's ``NeighborLoader.__init__`` and
    ``LinkNeighborLoader.__init__`` for loaders given a ``sampler_cls`` (once per process;
    idempotent)."""
    global _installed, _sampler_cls
    if _installed:
        return
    with _lock:
        if _installed:
            return
        _sampler_cls = sampler_cls
        from torch_geometric.loader import LinkNeighborLoader, NeighborLoader

        for cls in (NeighborLoader, LinkNeighborLoader):
            _guard(cls)
        _installed = True


def _guard(cls) -> None:
    init = cls.__dict__["__init__"]
    if getattr(init, "__graphfeed_checked__", False):
        return
    signature = inspect.signature(init)
    name = cls.__name__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        try:
            given = signature.bind(self, *args, **kwargs).arguments
        except TypeError:  # a call PyG itself refuses: its own error says why
            given = {}
        if isinstance(given.get("neighbor_sampler"), _sampler_cls):
            check_loader_call(name, given, given["neighbor_sampler"])
        init(self, *args, **kwargs)

    __init__.__graphfeed_checked__ = True
    cls.__init__ = __init__
