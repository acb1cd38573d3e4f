"""kolo's public headers, read as cffi declarations.

The binding declares nothing by hand: it reads the installed kolo.h and
kolo_fusion.h, drops what is for the preprocessor (include guards,
pragmas, the C++ block, function-like macros) and keeps the integer
#defines, which it evaluates (KOLO_CONFIG_UNDEF, KOLO_CONFIG_MAGIC, ...).
"""
import ast
import operator
import re

_DEFINE = re.compile(r"#\s*define\s+([A-Za-z_]\w*)\s+(.*)$")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.USub: operator.neg, ast.LShift: operator.lshift, ast.BitOr: operator.or_}


def _eval(node, known):
    if isinstance(node, ast.Expression):
        return _eval(node.body, known)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, known), _eval(node.right, known))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand, known))
    raise ValueError("not an integer expression")


def _int_macro(text, known):
    """The value of a #define's body when it is an integer expression, else None."""
    text = re.sub(r"/\*.*?\*/", "", text).strip()
    text = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]+\b", r"\1", text)
    try:
        return _eval(ast.parse(text, mode="eval"), known)
    except (SyntaxError, ValueError, TypeError):
        return None


def _logical_lines(source):
    """Lines with their backslash continuations joined."""
    return source.replace("\\\n", " ").splitlines()


def declarations(sources):
    """(cdef text, {macro: int}) from the headers' texts, in include order."""
    known, out = {}, []
    for source in sources:
        skip = 0  # depth inside #ifdef __cplusplus
        for line in _logical_lines(source):
            s = line.strip()
            if s.startswith("#"):
                if re.match(r"#\s*ifdef\s+__cplusplus", s):
                    skip += 1
                elif skip and re.match(r"#\s*endif", s):
                    skip -= 1
                m = _DEFINE.match(s)
                if m and not skip:
                    value = _int_macro(m.group(2), known)
                    if value is not None:
                        known[m.group(1)] = value
                continue
            if not skip:
                out.append(line)
    text = "\n".join(out)
    for name, value in known.items():  # cffi takes no macros: their values in place
        text = re.sub(r"\b%s\b" % name, str(value), text)
    return text, known
