"""Gradient compression, as Horovod names it: Compression.none,
Compression.fp16 and Compression.bf16 (float32 and float64 gradients
travel as float16 or bfloat16; other dtypes as they are)."""
import torch


class _NoneCompressor:
    name = "none"

    @staticmethod
    def wire_dtype(dtype):
        return dtype


class _FP16Compressor:
    name = "fp16"

    @staticmethod
    def wire_dtype(dtype):
        return torch.float16 if dtype in (torch.float32, torch.float64) else dtype


class _BF16Compressor:
    name = "bf16"

    @staticmethod
    def wire_dtype(dtype):
        return torch.bfloat16 if dtype in (torch.float32, torch.float64) else dtype


class Compression:
    none = _NoneCompressor
    fp16 = _FP16Compressor
    bf16 = _BF16Compressor
