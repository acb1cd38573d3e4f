"""A koloFusion_t (kolo_fusion.h) and tensors over its bucket views."""
import threading
import warnings

import torch

from kolo._lib import KoloError, check_fusion, ffi, lib, macros

_UNDEF_SIZE = 2 ** (8 * ffi.sizeof("size_t")) - 1  # KOLO_FUSION_UNDEF_SIZE: (size_t)-1


class Fusion:
    def __init__(self, comm, op, stream=None, rebuild=True, prescale=1.0):
        cfg = ffi.new("koloFusionConfig_t *")
        undef = macros["KOLO_CONFIG_UNDEF"]
        cfg.size = ffi.sizeof("koloFusionConfig_t")
        cfg.bucketBytes = cfg.firstBucketBytes = cfg.fusionBytes = _UNDEF_SIZE
        cfg.cycleTimeUs = cfg.minBuckets = undef
        cfg.op, cfg.preScale, cfg.rebuildBuckets = op, prescale, int(rebuild)
        cfg.stream = ffi.cast("koloStream_t", stream or 0)
        handle = ffi.new("koloFusion_t *")
        check_fusion(lib.koloFusionCreate(handle, comm, cfg), ffi.NULL, "koloFusionCreate")
        self.f, self.step_open = handle[0], False
        self.lock = threading.Lock()  # kolo_fusion.h: one thread at a time
        self._int = ffi.new("int *")

    def _call(self, what, fn, *args):
        with self.lock:
            return check_fusion(fn(self.f, *args), self.f, what)

    def add(self, count, dtype, storage):
        self._call("koloFusionAddTensor", lib.koloFusionAddTensor, count, dtype, storage, self._int)
        return self._int[0]

    def commit(self):
        self._call("koloFusionCommit", lib.koloFusionCommit)

    def version(self):
        self._call("koloFusionLayoutVersion", lib.koloFusionLayoutVersion, self._int)
        return self._int[0]

    def view(self, tensor_id, shape, dtype, device):
        """A tensor of `shape` over the bucket view of an ALLOCATE tensor."""
        ptr = ffi.new("void **")
        self._call("koloFusionTensorPtr", lib.koloFusionTensorPtr, tensor_id, ptr)
        nbytes = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
        address = int(ffi.cast("uintptr_t", ptr[0]))
        if device.type == "cuda":
            raw = torch.as_tensor(_CudaBytes(address, nbytes), device=device)
        else:
            raw = torch.frombuffer(ffi.buffer(ffi.cast("char *", address), nbytes), dtype=torch.uint8)
        return raw.view(dtype).view(shape)

    def mark(self, tensor_id, buf=None, event=None):
        """Marks a gradient ready, opening the step if none is open."""
        with self.lock:
            if not self.step_open:
                check_fusion(lib.koloFusionStepBegin(self.f), self.f, "koloFusionStepBegin")
                self.step_open = True
            check_fusion(lib.koloFusionMarkReady(self.f, tensor_id, ffi.cast("void *", buf or 0),
                                                 ffi.cast("koloEvent_t", event or 0)), self.f, "koloFusionMarkReady")

    def end(self, wait):
        """Ends the open step; with wait, blocks until it is reduced.  A step
        ended with gradients unmarked fails here at once; the round that
        follows fails every rank with the sentence naming both ranks' views,
        which Wait returns and this raises."""
        with self.lock:
            self.step_open = False
            res = lib.koloFusionStepEnd(self.f, ffi.NULL)
            if res != lib.koloSuccess:
                first = ffi.string(lib.koloFusionGetLastError(self.f)).decode(errors="replace")
                if lib.koloFusionWait(self.f) != lib.koloSuccess:
                    check_fusion(res, self.f, "%s; then koloFusionWait" % first)
                raise KoloError(res, first)
            if wait:
                check_fusion(lib.koloFusionWait(self.f), self.f, "koloFusionWait")

    def stats(self):
        s = ffi.new("koloFusionStats_t *")
        self._call("koloFusionGetStats", lib.koloFusionGetStats, s)
        return {k: getattr(s, k) for k in dir(s)}

    def destroy(self):
        with self.lock:
            if self.f is not None:
                if lib.koloFusionDestroy(self.f) != lib.koloSuccess:  # freed either way; say why
                    warnings.warn("kolo.torch: koloFusionDestroy: %s" %
                                  ffi.string(lib.koloFusionGetLastError(ffi.NULL)).decode(errors="replace"))
                self.f = None


class _CudaBytes:
    """Device memory as __cuda_array_interface__, for torch.as_tensor."""

    def __init__(self, address, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False),
                                         "version": 2, "strides": None}
