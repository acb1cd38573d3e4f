"""Reduction ops, with Horovod's names, as kolo's koloRedOp_t values."""
from kolo._lib import lib

Sum = lib.koloSum
Product = lib.koloProd
Max = lib.koloMax
Min = lib.koloMin
Average = lib.koloAvg

_NAMES = {Sum: "Sum", Product: "Product", Max: "Max", Min: "Min", Average: "Average"}


def op_name(op):
    return _NAMES.get(op, "op %r" % (op,))


def check_op(op, what):
    if op not in _NAMES:
        raise ValueError("%s: op %r is none of kolo.torch's Average, Sum, Min, Max, Product" % (what, op))
    return op
