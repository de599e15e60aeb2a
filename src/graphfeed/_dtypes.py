"""Dtypes that numpy lacks, shared by the dataset format and the feature backends (the bottom
floor, so both can read it)."""

from __future__ import annotations

__all__ = ["BITS_DTYPES"]

#: feature dtypes numpy has no type for, and the numpy dtype of the same width whose bits hold
#: them in the ``.npy`` (the metadata names the dtype, the file holds its bits; format_version
#: 3). uint16 rather than int16 for bfloat16: no graphfeed feature is uint16, so a bare file of
#: bf16 bits is never read as integers by mistake. The name is also torch's (``torch.bfloat16``).
BITS_DTYPES = {"bfloat16": "uint16"}
