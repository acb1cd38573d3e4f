"""Reduction ops, with Horovod's names, as kolo's koloRedOp_t values."""
from kolo._lib import lib

Sum = lib.koloSum
Product = lib.koloProd
Max = lib.koloMax
Min = lib.koloMin
Average = lib.koloAvg


class _AdasumOp:
    """Horovod's Adasum: not a koloRedOp_t but a call of its own
    (koloAdasum), so an object that no kolo reduction takes by mistake."""

    def __repr__(self):
        return "Adasum"


Adasum = _AdasumOp()

_NAMES = {Sum: "Sum", Product: "Product", Max: "Max", Min: "Min", Average: "Average", Adasum: "Adasum"}


def op_code(op):
    """An int for every op (Adasum is no koloRedOp_t: -1), as join's call descriptions carry it."""
    return -1 if op is Adasum else int(op)


def op_of(code):
    return Adasum if code == -1 else code


def op_name(op):
    return _NAMES.get(op, "op %r" % (op,))


def check_op(op, what):
    if op not in _NAMES:
        raise ValueError("%s: op %r is none of kolo.torch's Average, Sum, Min, Max, Product, Adasum" % (what, op))
    return op
