"""Models over sampled blocks: the floor below ``trainer/`` (it never imports the trainer).

- :mod:`.gnn`: ``GraphSAGE`` / ``GCN`` / ``GAT`` over blocks (PyG layers), ``build_model`` (the
  ``--model`` names), ``parameter_count``, the ``MLP`` baseline;
- :mod:`.rgcn`: ``HeteroRGCN``, the R-GCN of heterogeneous datasets;
- :mod:`.link`: ``LinkPredictor`` / ``TypedLinkPredictor`` (encoder + ``dot``/``mlp`` decoder);
- :mod:`.factory`: the model of a task over placed data (``node_model``, ``link_model``: the
  R-GCN on typed data, ``--model`` on untyped), ``input_width``, ``check_options``;
- :mod:`.adapter`: PyG models on graphfeed mini-batches (``apply_conv``, ``to_data``,
  ``StockModel``, ``LayerwiseModel``), also importable as ``graphfeed.trainer.adapter``.

Importing this package imports no torch (``trainer/config.py`` and the CLI's parser read
``MODEL_NAMES``); the names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .names import MODEL_NAMES

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".gnn": "BlockGNN GraphSAGE GCN GAT MLP build_model parameter_count",
    ".rgcn": "HeteroRGCN hetero_in_dim typed_in_dims",
    ".link": "LinkPredictor TypedLinkPredictor build_link_model",
    ".factory": "check_options input_width link_model model_name node_model",
}, eager=("MODEL_NAMES",))


if TYPE_CHECKING:  # pragma: no cover
    from .gnn import GAT, GCN, MLP, BlockGNN, GraphSAGE, build_model, parameter_count
    from .factory import check_options, input_width, link_model, model_name, node_model
    from .link import LinkPredictor, TypedLinkPredictor, build_link_model
    from .rgcn import HeteroRGCN, hetero_in_dim, typed_in_dims
