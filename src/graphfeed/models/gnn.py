"""Reference models for ``graphfeed train`` (``--model sage|gcn|gat``) over sampled blocks, and
the MLP baseline.

Every model is called as ``model(x, blocks)``: ``x`` float ``(len(input_nodes), in_dim)``, one
``Block`` per layer, output ``(num_seeds, out_dim)`` logits. Layer ``i`` runs on ``blocks[i]``
through :func:`graphfeed.models.adapter.apply_conv`, so SAGEConv and GATConv get the bipartite
``(x_src, x_dst)`` pair and GCNConv runs on the block's union node set.

PyG is an optional extra (``graphfeed[pyg]``), imported when a model is built.
"""

from __future__ import annotations

import warnings
from typing import Callable, Optional, Sequence

import torch
from torch import nn
import torch.nn.functional as F

from ..errors import MissingDependencyError
from ..sampling.base import Block
from .names import MODEL_NAMES, NORMS
from .adapter import accepts_bipartite, apply_conv

__all__ = ["BlockGNN", "GraphSAGE", "GCN", "GAT", "MLP", "build_model", "parameter_count"]


def _pyg_nn():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        raise MissingDependencyError("torch_geometric", "pyg", "graphfeed's GNN models") from None
    return pyg_nn


class BlockGNN(nn.Module):
    """``convs[i]`` on ``blocks[i]``, with ``norms[i]`` (or none), ``activation`` and dropout
    between layers. ``skips``: one module per layer (or none) whose output on the destinations'
    own input rows is added to the convolution's (a residual connection: ``nn.Identity`` where
    the widths agree, a ``Linear`` where they do not); a destination's output still depends only
    on its own row and its in-edges, so layer-wise inference stays exact."""

    def __init__(self, convs: Sequence[nn.Module], norms: Sequence[nn.Module] = (), *,
                 dropout: float = 0.5, activation: Callable = F.relu, input_dropout: bool = False,
                 skips: Sequence[nn.Module] = ()):
        super().__init__()
        if not convs:
            raise ValueError("a GNN needs at least one layer")
        if norms and len(norms) != len(convs) - 1:
            raise ValueError(f"one norm between each two layers: {len(convs) - 1}, got {len(norms)}")
        if skips and len(skips) != len(convs):
            raise ValueError(f"one skip per layer: {len(convs)}, got {len(skips)}")
        self.convs = nn.ModuleList(convs)
        self.norms = nn.ModuleList(norms)
        self.skips = nn.ModuleList(skips)
        self.dropout = dropout
        self.activation = activation
        self.input_dropout = input_dropout

    def _layer(self, conv: nn.Module, x: torch.Tensor, block: Block) -> torch.Tensor:
        if _wide_mean_sage(conv, x, block.edge_index.shape[1]):
            return _sage_sparse_mean(conv, x, block)
        return apply_conv(conv, x, block)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    @property
    def layerwise_exact(self) -> bool:
        """Whether a destination's output depends only on its in-edges and its sources' inputs,
        never on which other nodes share its block, so that layer-wise inference over full
        neighbourhoods equals evaluation with every neighbour sampled. True when every
        convolution takes the bipartite ``(x_src, x_dst)`` pair; a convolution run on the
        block's union node set (stock ``GCNConv``) normalises with in-block degrees, which
        change with the batch."""
        return all(accepts_bipartite(c) for c in self.convs)

    #: layer 0 takes stored rows of any dtype (``models.layerwise.model_inputs``) and widens them
    reads_stored_rows = True

    def layer(self, i: int, x: torch.Tensor, block: Block) -> torch.Tensor:
        """Layer ``i`` alone on one block: ``x`` ``(block.num_src, in_dim_i)``, the result
        ``(block.num_dst, out_dim_i)``: the convolution, then (below the last layer) the norm,
        the activation and dropout (active only in training mode); layer 0 first drops input
        features when the model does. :meth:`forward` is these layers in turn, so layer-wise
        inference (``graphfeed.trainer.layerwise``) runs exactly the training code. Layer 0
        takes stored rows of any dtype: a wide mean-SAGE or graph-normalised GCN layer reads
        many integer rows (0/1 bag-of-words stored as uint8) as they are, in CSR form
        (:func:`_sparse_input`, :meth:`_sparse_layer`); any other widens them to float32
        (exactly)."""
        conv = self.convs[i]
        if i == 0 and not x.is_floating_point():
            x = x.reshape(x.shape[0], -1)
            if not self.skips and self._reads_rows(conv) and _sparse_input(conv, x):
                p = self.dropout if self.input_dropout and self.training else 0.0
                return self.finish_layer(0, self._sparse_layer(conv, _csr_rows(x, p), block),
                                         None)
            x = x.to(torch.float32)
        if self.input_dropout and i == 0:
            x = F.dropout(x, p=self.dropout, training=self.training)
        return self.finish_layer(i, self._layer(conv, x, block), lambda: x[: block.num_dst])

    def _reads_rows(self, conv: nn.Module) -> bool:
        """Whether ``conv`` as layer 0 reads integer rows in CSR form (:meth:`_sparse_layer`):
        a mean ``SAGEConv``."""
        return _mean_sage(conv)

    def _sparse_layer(self, conv: nn.Module, rows: tuple, block: Block) -> torch.Tensor:
        """Layer 0's convolution on CSR rows ``(crow, cols, vals)`` (:func:`_csr_rows`): the
        mean ``SAGEConv``'s, both linear maps as CSR products (:class:`_CSRTimes`), the
        neighbour mean taken after ``lin_l`` (the same value: the mean is linear) over rows
        ``out_channels`` wide."""
        crow, cols, vals = rows
        n = block.num_dst
        h = _CSRTimes.apply(conv.lin_l.weight.t(), crow, cols, vals)  # (num_src, out)
        out = _weighted_sum(h, block.edge_index, None, n)
        out = out / torch.bincount(block.edge_index[1], minlength=n).clamp(min=1).unsqueeze(1)
        if conv.lin_l.bias is not None:
            out = out + conv.lin_l.bias
        if conv.root_weight:
            cut = int(crow[n])  # the destinations' rows come first
            out = out + _CSRTimes.apply(conv.lin_r.weight.t(), crow[:n + 1], cols[:cut],
                                        vals[:cut])
            if conv.lin_r.bias is not None:
                out = out + conv.lin_r.bias
        if conv.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out

    def finish_layer(self, i: int, out: torch.Tensor, dst_input: Callable) -> torch.Tensor:
        """What layer ``i`` applies after its convolution ``out``: the residual connection on
        the destinations' own input rows (``dst_input()``, called only when the model has one),
        then below the last layer the norm, the activation and dropout. :meth:`layer` and the
        layer-wise evaluator's direct layers both end a layer here."""
        if self.skips:
            out = out + self.skips[i](dst_input())
        if i < len(self.convs) - 1:
            if self.norms:
                out = self.norms[i](out)
            out = self.activation(out)
            out = F.dropout(out, p=self.dropout, training=self.training)
        return out

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        if len(blocks) != len(self.convs):
            raise ValueError(f"the model has {len(self.convs)} layers but the batch {len(blocks)} blocks")
        for i, block in enumerate(blocks):
            x = self.layer(i, x, block)
        return x


#: the per-edge rows (bytes) from which a wide mean-SAGE layer aggregates as one sparse product:
#: below it PyG's gather is cheaper (the sparse product's coalesce sorts the edges and waits for
#: the GPU; on an H100, 2026-11-27, a `medium` training step replayed without it was 1.0-1.7 ms
#: cheaper, docs/benchmarks.md "GPU")
SPARSE_MEAN_MIN_BYTES = 64 << 20


def _wide_mean_sage(conv: nn.Module, x: torch.Tensor, num_edges: int) -> bool:
    """A mean-aggregation ``SAGEConv`` on input rows wider than its output whose gather of a
    source row per edge would hold at least :data:`SPARSE_MEAN_MIN_BYTES`: aggregated by
    :func:`_sage_sparse_mean`, which never holds a row per edge at the input width."""
    return (_mean_sage(conv) and x.shape[1] > conv.out_channels
            and num_edges * x.shape[1] * x.element_size() >= SPARSE_MEAN_MIN_BYTES)


def _mean_sage(conv: nn.Module) -> bool:
    """A mean-aggregation ``SAGEConv`` without its own input projection."""
    return (type(conv).__name__ == "SAGEConv" and str(getattr(conv, "aggr", "")) == "mean"
            and not conv.project)


#: the float32 input rows (bytes) from which a wide mean-SAGE layer reads integer rows as they
#: are (:meth:`BlockGNN._sparse_layer`): below it widening them is cheaper than finding their nonzeros
SPARSE_INPUT_MIN_BYTES = 64 << 20


def _sparse_input(conv: nn.Module, x: torch.Tensor) -> bool:
    """Integer rows ``x`` (on the CPU) that a layer 0 narrower than them reads without widening
    (where the model can: ``BlockGNN._reads_rows``): when their float32 copy would hold at
    least :data:`SPARSE_INPUT_MIN_BYTES`."""
    return (x.device.type == "cpu" and x.shape[1] > conv.out_channels
            and 4 * x.shape[0] * x.shape[1] >= SPARSE_INPUT_MIN_BYTES)


def _csr_rows(x: torch.Tensor, p: float) -> tuple:
    """Integer rows ``x`` in CSR form ``(crow, cols, vals)`` (float32 values; the
    :func:`~graphfeed.models._kernels.csr_of_rows` pass), with input dropout ``p`` on the
    nonzeros (a dropped zero is still zero: the same distribution as dropout on the dense
    rows)."""
    from ._kernels import csr_of_rows

    crow = torch.empty(x.shape[0] + 1, dtype=torch.long)
    cols, vals = map(torch.from_numpy, csr_of_rows(x.numpy(), crow.numpy()))
    if p > 0:
        vals = vals * (torch.rand(vals.shape) >= p) / (1.0 - p)
    return crow, cols, vals


def _weighted_sum(h: torch.Tensor, edge_index: torch.Tensor, weight, n: int) -> torch.Tensor:
    """``out[v] = sum over edges u -> v of weight_e * h[u]`` (weight 1 when ``None``) for the
    ``n`` destinations."""
    msg = h.index_select(0, edge_index[0])
    if weight is not None:
        msg = msg * weight.to(msg.dtype).unsqueeze(1)
    return torch.zeros(n, h.shape[1], dtype=h.dtype).index_add_(0, edge_index[1], msg)


# torch says once that CSR tensors are "in beta": the CSR first layer (_CSRTimes) uses only
# their construction and product, tested here; a filter once, not a catch_warnings per call
# (which rewrites the process's filters under the loader threads on every step)
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta",
                        category=UserWarning)


def _csr(crow, cols, vals, num_cols: int) -> torch.Tensor:
    # built by our own kernels (csr_of_rows, csr_transpose): valid by construction
    return torch.sparse_csr_tensor(crow, cols, vals, (crow.shape[0] - 1, num_cols),
                                   check_invariants=False)


class _CSRTimes(torch.autograd.Function):
    """``X @ weight_t`` for a CSR matrix ``X = (crow, cols, vals)`` (no gradient) and a dense
    ``weight_t``; the backward multiplies the gradient by ``X``'s transpose
    (:func:`~graphfeed.models._kernels.csr_transpose`), never by a dense ``X``."""

    @staticmethod
    def forward(ctx, weight_t, crow, cols, vals):
        ctx.save_for_backward(crow, cols, vals)
        ctx.num_cols, ctx.dtype = int(weight_t.shape[0]), weight_t.dtype
        with torch.autocast("cpu", enabled=False):  # float32: no bfloat16 sparse product
            return _csr(crow, cols, vals, ctx.num_cols) @ weight_t.float()

    @staticmethod
    def backward(ctx, grad):
        from ._kernels import csr_transpose

        crow, cols, vals = ctx.saved_tensors
        t = csr_transpose(crow.numpy(), cols.numpy(), vals.numpy(), ctx.num_cols)
        tcrow, tcols, tvals = map(torch.from_numpy, t)
        with torch.autocast("cpu", enabled=False):
            g = _csr(tcrow, tcols, tvals, int(grad.shape[0])) @ grad.float()
        return g.to(ctx.dtype), None, None, None


def _sage_sparse_mean(conv: nn.Module, x: torch.Tensor, block: Block) -> torch.Tensor:
    """``SAGEConv`` with mean aggregation on one block, the neighbour mean taken as one sparse
    product ``A x`` (``A[v, u] = 1 / in-degree of v in the block``) instead of PyG's gather of a
    source row per edge: the same ``lin_l(mean x_u) + lin_r(x_v)``, but the largest temporary is
    a row per destination, not per edge (a 4,714-wide input with 4096-seed batches held GBs of
    per-edge rows). Gradients flow to ``x`` through the sparse product."""
    n = block.num_dst
    src, dst = block.edge_index[0], block.edge_index[1]
    count = torch.bincount(dst, minlength=n).to(x.dtype)
    w = (1.0 / count.clamp(min=1))[dst]
    # the block's ids are in range by construction (the sampler's relabelling)
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), w, (n, x.shape[0]),
                                  check_invariants=False)
    out = conv.lin_l(torch.sparse.mm(adj, x))
    if conv.root_weight:
        out = out + conv.lin_r(x[:n])
    if conv.normalize:
        out = F.normalize(out, p=2.0, dim=-1)
    return out


def _dims(in_dim: int, hidden: int, out_dim: int, num_layers: int) -> list[int]:
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return [in_dim] + [hidden] * (num_layers - 1) + [out_dim]


def _norms(norm: str, default: str, hidden: int, num_layers: int) -> list:
    kind = default if norm == "auto" else norm
    if kind not in NORMS[1:]:
        raise ValueError(f"norm must be one of {', '.join(NORMS)}, got {norm!r}")
    if kind == "none":
        return []
    make = nn.LayerNorm if kind == "layer" else nn.BatchNorm1d
    return [make(hidden) for _ in range(num_layers - 1)]


def _skips(residual: bool, d: list) -> list:
    """A residual connection per layer: identity where the widths agree, else a linear map."""
    if not residual:
        return []
    return [nn.Identity() if d[i] == d[i + 1] else nn.Linear(d[i], d[i + 1], bias=False)
            for i in range(len(d) - 1)]


def GraphSAGE(in_dim: int, hidden: int, out_dim: int, *positional, num_layers: int = 2,
              dropout: float = 0.5, norm: str = "auto", residual: bool = False,
              input_dropout: Optional[bool] = None) -> BlockGNN:
    """Mean-aggregation GraphSAGE: bipartite ``SAGEConv`` per block, a norm (LayerNorm unless
    ``norm`` says otherwise) + ReLU + dropout between layers; ``residual`` adds each layer's input
    to its output. ``num_layers`` and what follows are keyword-only (:func:`_by_name`).

    ``input_dropout``: drop input features too, as GCN and GAT do. ``None`` (auto): when the
    input is wider than the hidden layer. Wide inputs (bag-of-words, text embeddings) are
    redundant, and dropping their entries is the usual regulariser: on Cora and CiteSeer it adds
    about a point of test accuracy (docs/training.md). A few dense features are not redundant:
    dropping 8 inputs whose first carries the signal kept a binary task at the majority class."""
    _by_name("GraphSAGE", positional)
    pyg = _pyg_nn()
    d = _dims(in_dim, hidden, out_dim, num_layers)
    convs = [pyg.SAGEConv(d[i], d[i + 1]) for i in range(num_layers)]
    return BlockGNN(convs, _norms(norm, "layer", hidden, num_layers), dropout=dropout,
                    input_dropout=in_dim > hidden if input_dropout is None else input_dropout,
                    skips=_skips(residual, d))


class _GraphNormGCN(BlockGNN):
    """GCN layers normalised with the whole graph's in-degrees ``d`` (held as a buffer, not saved
    in the state dict): the edge ``u -> v`` weighs ``(d_v / k_v) / sqrt((d_u + 1)(d_v + 1))``
    where ``k_v`` is how many in-edges of ``v`` the block sampled, and ``v``'s self-loop
    ``1 / (d_v + 1)``. With every neighbour sampled (``k_v = d_v``) a layer computes exactly the
    full-graph ``D^-1/2 (A + I) D^-1/2 X W`` at the block's destinations; with fewer, the
    ``d_v / k_v`` factor keeps the neighbour sum unbiased."""

    def __init__(self, convs, in_degrees, **kw):
        super().__init__(convs, **kw)
        self.register_buffer("in_degrees", torch.as_tensor(in_degrees, dtype=torch.float32),
                             persistent=False)

    @property
    def layerwise_exact(self) -> bool:
        # a destination's weights use only the graph's degrees and its own sampled in-edges
        return True

    def _layer(self, conv, x, block):
        edge_index, weight = self._edges(block)
        return conv(x, edge_index, weight)[: block.num_dst]

    def _reads_rows(self, conv) -> bool:
        return type(conv).__name__ == "GCNConv" and not conv.normalize

    def _sparse_layer(self, conv, rows, block):
        """``GCNConv``'s linear map as a CSR product, then the same weighted sum."""
        edge_index, weight = self._edges(block)
        h = _CSRTimes.apply(conv.lin.weight.t(), *rows)
        out = _weighted_sum(h, edge_index, weight, block.num_dst)
        return out + conv.bias if conv.bias is not None else out

    def _edges(self, block):
        """The block's edges and self-loops and their weights (the class docstring)."""
        src, dst = block.edge_index[0], block.edge_index[1]
        deg = self.in_degrees[block.src_nodes]  # (num_src,), destinations first
        deg_dst = deg[: block.num_dst]
        k = torch.bincount(dst, minlength=block.num_dst).to(deg.dtype)
        scale = torch.where(k > 0, deg_dst / k.clamp(min=1), torch.zeros_like(k))
        inv = (deg + 1).rsqrt()
        w = scale[dst] * inv[src] * inv[dst]
        loops = torch.arange(block.num_dst, device=dst.device)
        edge_index = torch.cat([block.edge_index, torch.stack([loops, loops])], dim=1)
        return edge_index, torch.cat([w, 1.0 / (deg_dst + 1)])


def GCN(in_dim: int, hidden: int, out_dim: int, *positional, num_layers: int = 2,
        dropout: float = 0.5, in_degrees=None, norm: str = "auto",
        residual: bool = False) -> BlockGNN:
    """Kipf & Welling's GCN: ReLU and dropout (also on the input features) between layers.

    With ``in_degrees`` (the graph's, ``(num_nodes,)``) the normalisation uses the whole graph's
    degrees (:class:`_GraphNormGCN`: exact on full neighbourhoods); without, stock ``GCNConv``
    runs on each block's union node set and normalises with in-block degrees."""
    _by_name("GCN", positional)
    pyg = _pyg_nn()
    d = _dims(in_dim, hidden, out_dim, num_layers)
    extra = dict(norms=_norms(norm, "none", hidden, num_layers), skips=_skips(residual, d),
                 dropout=dropout, input_dropout=True)
    if in_degrees is None:
        convs = [pyg.GCNConv(d[i], d[i + 1]) for i in range(num_layers)]
        return BlockGNN(convs, **extra)
    convs = [pyg.GCNConv(d[i], d[i + 1], normalize=False) for i in range(num_layers)]
    return _GraphNormGCN(convs, in_degrees, **extra)


def GAT(in_dim: int, hidden: int, out_dim: int, *positional, num_layers: int = 2,
        dropout: float = 0.5, heads: int = 8, norm: str = "auto",
        residual: bool = False) -> BlockGNN:
    """Veličković et al.'s GAT: bipartite ``GATConv``; hidden layers concatenate ``heads`` heads
    of ``hidden // heads`` features, the output layer has one head; ELU and dropout between
    layers, dropout on the input features and on the attention coefficients."""
    _by_name("GAT", positional)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    pyg = _pyg_nn()
    convs = []
    dim = in_dim
    for i in range(num_layers):
        last = i == num_layers - 1
        convs.append(pyg.GATConv(dim, out_dim if last else hidden // heads, heads=1 if last else heads,
                                 concat=not last, dropout=dropout))
        dim = hidden
    return BlockGNN(convs, _norms(norm, "none", hidden, num_layers), dropout=dropout,
                    activation=F.elu, input_dropout=True,
                    skips=_skips(residual, _dims(in_dim, hidden, out_dim, num_layers)))


def _by_name(model: str, positional: tuple) -> None:
    """``GraphSAGE(32, 128, 3, 5)`` is PyG's ``(in, hidden, num_layers, out)`` order and would
    silently build 5 layers with 3 outputs in graphfeed's ``(in, hidden, out)``: a fourth
    positional argument is refused, naming both orders."""
    if positional:
        raise TypeError(f"{model}(in_dim, hidden, out_dim, *, num_layers=...): pass num_layers and "
                        f"the rest by name; got {len(positional)} more positional argument(s) "
                        f"{positional} (PyG's models take (in, hidden, num_layers, out))")


def build_model(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int, *,
                dropout: float = 0.5, heads: int = 8, in_degrees=None, norm: str = "auto",
                residual: bool = False) -> BlockGNN:
    """The ``--model`` names: ``sage``, ``gcn``, ``gat``. ``in_degrees``: the graph's, for GCN's
    normalisation (see :func:`GCN`); ``norm`` and ``residual``: see :data:`NORMS`,
    :func:`_skips`."""
    kw = dict(num_layers=num_layers, dropout=dropout, norm=norm, residual=residual)
    if name == "sage":
        return GraphSAGE(in_dim, hidden, out_dim, **kw)
    if name == "gcn":
        return GCN(in_dim, hidden, out_dim, in_degrees=in_degrees, **kw)
    if name == "gat":
        return GAT(in_dim, hidden, out_dim, heads=heads, **kw)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")


def parameter_count(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int) -> int:
    """About how many parameters :func:`build_model` makes (an upper bound within a few
    percent), computed without allocating them."""
    d = _dims(in_dim, hidden, out_dim, num_layers)
    per_layer = 2 if name == "sage" else 1  # SAGEConv: a root and a neighbour weight
    total = sum(per_layer * d[i] * d[i + 1] + 4 * d[i + 1] for i in range(num_layers))
    return total + 2 * hidden * (num_layers - 1)


class MLP(nn.Module):
    """The baseline: the same width and depth, but each node sees only its own features."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        dims = _dims(in_dim, hidden, out_dim, num_layers)
        self.lins = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.lins):
            x = lin(x)
            if i < len(self.lins) - 1:
                x = F.relu(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x
