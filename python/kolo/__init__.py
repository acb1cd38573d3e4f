"""kolo: Python binding of the kolo collectives library (libkolo, through
cffi).  The PyTorch API is kolo.torch."""
from kolo._lib import KoloError

__all__ = ["KoloError"]
