"""``graphfeed.trainer.adapter`` is :mod:`graphfeed.models.adapter` (PyG models on graphfeed
mini-batches); it moved below the trainer with the models that use it, and this name stays for
the code and documentation that import it from here."""

from ..models.adapter import *  # noqa: F401,F403
from ..models.adapter import __all__, ModelFactory  # noqa: F401
