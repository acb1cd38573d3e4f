"""The torch.distributed backend "kolo": init_process_group(backend="kolo")
after `import kolo.torch` (docs/pytorch-backend.md says what it supports).

A process group is a Python subclass of PyTorch's ProcessGroup over one
host communicator of its own, made with koloCommInitRank from a unique id
that the group's rank 0 puts in the store torch gives the backend (every
group, new_group's included, gets its own store prefix).  CUDA tensors go
to a CUDA communicator split from it at the group's first CUDA call (every
rank makes that call), on PyTorch's current stream; host all-reduces
and the DDP hook of kolo.torch use a non-blocking twin split at the first
such call.

Host calls run to completion before they return (kolo's blocking
communicators): the Work is then complete, and its future done with the
result tensors, as Gloo's.  Host all-reduces are the exception: they run
on the non-blocking twin while the caller goes on (_completer.py),
so that DDP's backward overlaps its buckets' reduction.  Sends and
receives are queued and issued together, as one kolo group, at the first
wait() on one of them or the group's next other call, so that every rank
may send before it receives.
"""
import atexit
import collections
import inspect
import weakref

import torch
import torch.distributed as dist

from kolo._lib import KoloError, check, ffi, last_error, lib
from kolo.torch import _comms
from kolo.torch._dtypes import KOLO_TYPES, as_bytes
from kolo.torch._placement import cuda_stream, memory_kind, ptr
from kolo.torch._progress import Progress
from kolo.torch._backend_calls import _call_all, _flat_bytes, _from_kolo, _kolo_op, _nbytes, _recv, _send, _to_kolo
from kolo.torch._backend_work import KoloWork
from kolo.torch._completer import Completer, named
from kolo.torch._reduce import _issue as _allreduce_issue

NAME = "kolo"
_UID_KEY = "kolo/unique_id"
_TORCH_DEFAULT_TIMEOUT = dist.distributed_c10d.default_pg_timeout
_create_work_from_future = torch._C._distributed_c10d._create_work_from_future


class KoloProcessGroup(dist.ProcessGroup):
    """A torch.distributed process group over kolo (see the module's text)."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        # A timeout given to init_process_group / new_group bounds kolo's
        # waits for a peer; torch's default leaves KOLO_TIMEOUT_MS or kolo's.
        self._timeout_ms = None
        if timeout is not None and timeout != _TORCH_DEFAULT_TIMEOUT:
            self._timeout_ms = max(1, min(2 ** 31 - 1, int(timeout.total_seconds() * 1000)))
        uid = ffi.new("koloUniqueId *")
        if rank == 0:
            check(lib.koloGetUniqueId(uid), None, "kolo backend: koloGetUniqueId")
            store.set(_UID_KEY, bytes(ffi.buffer(uid)))
        else:
            data = store.get(_UID_KEY)
            ffi.memmove(uid, data, len(data))
        comm = ffi.new("koloComm_t *")
        cfg = _comms.new_config(memory=lib.koloMemHost, timeout_ms=self._timeout_ms)
        check(lib.koloCommInitRankConfig(comm, size, uid[0], rank, cfg), None,
              "kolo backend: joining a group of %d ranks as rank %d" % (size, rank))
        self._host, self._cuda, self._device, self._async, self._progress = comm[0], None, None, None, None
        self._queued = []  # (call, work) of sends and receives not issued yet
        self._completer = Completer("kolo-backend")  # host all-reduces in flight on the twin
        self._failed = collections.deque(maxlen=64)
        _live.add(self)

    # ---- names torch asks for
    def getBackendName(self):
        return NAME

    def _get_backend_name(self):
        return NAME

    def __repr__(self):
        return "KoloProcessGroup(rank %d of %d)" % (self._rank, self._size)

    # ---- communicators (also what _handle.run takes as `comms`)
    def comm_and_stream(self, kind, device):
        self._alive()
        if kind != "cuda":
            return self._host, ffi.NULL
        index = torch.cuda.current_device() if device.index is None else device.index
        if self._cuda is None:
            self._cuda = _comms.split(self._host, lib.koloMemCuda, device=index, key=self._rank,
                                      timeout_ms=self._timeout_ms)
            self._device = index
        elif self._device != index:
            raise ValueError("kolo backend: this group's CUDA communicator is on cuda:%d; a tensor on cuda:%d "
                             "cannot use it (one device per process)" % (self._device, index))
        return self._cuda, cuda_stream(device)

    def host_progress(self):
        """The non-blocking twin's Progress (kolo_hook's host buckets)."""
        self._alive()
        if self._progress is None:
            self._async = _comms.split(self._host, lib.koloMemHost, blocking=0, key=self._rank,
                                       timeout_ms=self._timeout_ms)
            self._progress = Progress(self._async)
        return self._progress

    def _alive(self):
        if self._host is None:
            raise RuntimeError("kolo backend: this process group was destroyed")

    def shutdown(self):
        """Destroys the group's communicators (destroy_process_group)."""
        self._completer.stop()
        for key in ("_async", "_cuda", "_host"):
            comm = getattr(self, key)
            if comm is not None:
                setattr(self, key, None)
                _comms.destroy(comm, "kolo backend's " + key[1:])
        self._progress = None

    def __del__(self):
        try:
            self.shutdown()
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass

    # ---- running calls
    def _run(self, tensors, what, calls, finish, result):
        """Issues the kolo calls as one group on the communicator of the
        tensors' memory; finish() copies results out.  A Work, complete."""
        kind, device = memory_kind(tensors, what) if tensors else ("host", None)
        comm, stream = self.comm_and_stream(kind, device)
        self._flush()
        self._completer.drain()
        calls = [c for c in calls if c is not None]
        error = None
        if calls:
            res = _call_all(calls, comm, stream)
            if res not in (lib.koloSuccess, lib.koloInProgress):
                error = KoloError(res, "%s: %s" % (what, last_error(comm) or
                                                   ffi.string(lib.koloGetErrorString(res)).decode()))
        if error is None and finish is not None:
            finish()
        return self._work(result, error, device if kind == "cuda" else None)

    def _work(self, result, error=None, device=None):
        """The Work of a call that has run (or been enqueued on a CUDA
        stream).  Done: PyTorch's Work over a done future, as Gloo's (its
        future has the result tensors; CUDA: a CUDA-aware future, and wait()
        makes the current stream wait).  Failed: a KoloWork that raises."""
        if error is not None:
            work = KoloWork(result, error=error)
            self._failed.append(work)
            return work
        future = torch.futures.Future(devices=[device]) if device is not None else torch.futures.Future()
        future.set_result(result)
        return _create_work_from_future(future)

    def _flush(self):
        """Issues the queued sends and receives as one kolo group."""
        if not self._queued:
            return
        self._completer.drain()
        queued, self._queued = self._queued, []
        works = [w for _, w in queued]
        kind, device = memory_kind([t for w in works for t in w._result], "kolo backend: send/recv")
        comm, stream = self.comm_and_stream(kind, device)
        res = _call_all([c for c, _ in queued if c is not None], comm, stream) if any(c for c, _ in queued) \
            else lib.koloSuccess
        error = None
        if res not in (lib.koloSuccess, lib.koloInProgress):
            error = KoloError(res, "kolo backend: send/recv: %s" % (last_error(comm) or
                                                                   ffi.string(lib.koloGetErrorString(res)).decode()))
        for _, work in queued:
            if error is None and work._finish is not None:
                work._finish()
            work._complete(error, device if kind == "cuda" else None)

    def _check_root(self, root, what):
        if not 0 <= root < self._size:
            raise ValueError("%s: root %d is not a rank of this group (0..%d)" % (what, root, self._size - 1))

    @staticmethod
    def _one(tensors, what):
        if len(tensors) != 1:
            raise RuntimeError("%s: kolo takes one tensor per call (one device per process), not %d" %
                               (what, len(tensors)))
        return tensors[0]

    # ---- reductions
    def allreduce(self, tensors, opts=None):
        what = "kolo backend: all_reduce"
        tensor = self._one(tensors, what)
        return self._allreduce([tensor], opts, what)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._allreduce(list(tensors), opts, "kolo backend: all_reduce_coalesced")

    def _allreduce(self, tensors, opts, what):
        op = _kolo_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, what)
        kind, device = memory_kind(tensors, what)
        self._flush()
        if kind == "cuda":
            self._completer.drain()
        try:
            issued = _allreduce_issue(tensors, op, True, kind == "host", what, comms=self)
        except KoloError as e:
            return self._work(list(tensors), named(e, what))
        if kind == "cuda":
            return self._work(list(tensors), None, device)
        return _create_work_from_future(self._completer.add(issued, what))

    def reduce(self, tensors, opts):
        what = "kolo backend: reduce"
        tensor = self._one(tensors, what)
        op = _kolo_op(opts.reduceOp, what)
        root = opts.rootRank
        self._check_root(root, what)
        buf = _to_kolo(tensor, op, what)
        call = (lambda comm, stream: lib.koloReduce(ptr(buf), ptr(buf), buf.numel(), KOLO_TYPES[buf.dtype], op, root,
                                                   comm, stream)) if buf.numel() else None

        def finish():
            if self._rank == root and buf.data_ptr() != tensor.data_ptr():
                tensor.copy_(_from_kolo(buf, tensor.dtype))
        return self._run([tensor], what, [call], finish, [tensor])

    def _reduce_scatter(self, output, blocks, op, what):
        """Reduces block i over every rank into rank i's output; blocks
        may differ in size (each is padded to the largest)."""
        sizes = [b.numel() for b in blocks]
        if output.numel() != sizes[self._rank]:
            raise ValueError("%s: the output has %d elements, this rank's input block %d" %
                             (what, output.numel(), sizes[self._rank]))
        most = max(sizes)
        first = _to_kolo(blocks[0].reshape(-1)[:0], op, what)  # the kolo type
        send = torch.zeros((len(blocks), most) + tuple(first.shape[1:]), dtype=first.dtype, device=output.device)
        for i, b in enumerate(blocks):
            send[i, :sizes[i]] = _to_kolo(b.reshape(-1), op, what)
        recv = torch.empty_like(send[0])
        count = recv.numel()
        call = (lambda comm, stream: lib.koloReduceScatter(ptr(send), ptr(recv), count, KOLO_TYPES[recv.dtype], op,
                                                          comm, stream)) if count else None

        def finish():
            output.copy_(_from_kolo(recv[:sizes[self._rank]], output.dtype).reshape(output.shape))
        return self._run([output] + list(blocks), what, [call], finish, [output])

    def reduce_scatter(self, output_tensors, input_tensor_lists, opts=None):
        what = "kolo backend: reduce_scatter"
        output, blocks = self._one(output_tensors, what), self._one(input_tensor_lists, what)
        if len(blocks) != self._size:
            raise ValueError("%s: %d input tensors for a group of %d ranks" % (what, len(blocks), self._size))
        op = _kolo_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, what)
        return self._reduce_scatter(output, list(blocks), op, what)

    def _reduce_scatter_base(self, output, input, opts=None):
        what = "kolo backend: reduce_scatter_tensor"
        if input.numel() != output.numel() * self._size:
            raise ValueError("%s: the input has %d elements, not %d ranks x the output's %d" %
                             (what, input.numel(), self._size, output.numel()))
        op = _kolo_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, what)
        return self._reduce_scatter(output, list(input.reshape(-1).chunk(self._size)) if output.numel() else
                                    [input.reshape(-1)[:0]] * self._size, op, what)

    reduce_scatter_tensor = _reduce_scatter_base

    # ---- copies: any dtype, as its bytes
    def broadcast(self, tensors, opts):
        what = "kolo backend: broadcast"
        tensor = self._one(tensors, what)
        root = opts.rootRank
        self._check_root(root, what)
        work = tensor if tensor.is_contiguous() else tensor.contiguous()
        buf = as_bytes(work)
        call = (lambda comm, stream: lib.koloBroadcast(ptr(buf), ptr(buf), buf.numel(), lib.koloUint8, root, comm,
                                                      stream)) if buf.numel() else None

        def finish():
            if work is not tensor:
                tensor.copy_(work)
        return self._run([tensor], what, [call], finish, [tensor])

    def _allgather_into(self, outputs, input, what):
        """Every rank's input into outputs[i] (sizes may differ by rank:
        then as sends and receives)."""
        if len(outputs) != self._size:
            raise ValueError("%s: %d output tensors for a group of %d ranks" % (what, len(outputs), self._size))
        for o in outputs:
            if o.dtype != input.dtype:
                raise TypeError("%s: an output is %s, the input %s" % (what, o.dtype, input.dtype))
        if outputs[self._rank].numel() != input.numel():
            raise ValueError("%s: this rank's output has %d elements, its input %d" %
                             (what, outputs[self._rank].numel(), input.numel()))
        send = _flat_bytes(input)
        if all(o.numel() == input.numel() for o in outputs):
            recv = torch.empty(self._size * send.numel(), dtype=torch.uint8, device=input.device)
            call = (lambda comm, stream: lib.koloAllGather(ptr(send), ptr(recv), send.numel(), lib.koloUint8, comm,
                                                          stream)) if send.numel() else None
            parts = list(recv.chunk(self._size)) if send.numel() else [recv] * self._size
            calls = [call]
        else:
            parts = [torch.empty(_nbytes(o), dtype=torch.uint8, device=input.device) for o in outputs]
            calls = [_send(send, j) for j in range(self._size) if send.numel()]
            calls += [_recv(p, i) for i, p in enumerate(parts) if p.numel()]

        def finish():
            for o, p in zip(outputs, parts):
                o.copy_(p.view(o.dtype).reshape(o.shape))
        return calls, finish

    def allgather(self, output_tensor_lists, input_tensors, opts=None):
        what = "kolo backend: all_gather"
        outputs, input = self._one(output_tensor_lists, what), self._one(input_tensors, what)
        calls, finish = self._allgather_into(list(outputs), input, what)
        return self._run([input] + list(outputs), what, calls, finish, list(outputs))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        what = "kolo backend: all_gather_coalesced"
        calls, finishes = [], []
        for outputs, input in zip(output_lists, input_list):
            c, f = self._allgather_into(list(outputs), input, what)
            calls += c
            finishes.append(f)
        tensors = list(input_list) + [o for outs in output_lists for o in outs]
        return self._run(tensors, what, calls, lambda: [f() for f in finishes], [list(o) for o in output_lists])

    def _allgather_base(self, output, input, opts=None):
        what = "kolo backend: all_gather_into_tensor"
        if output.dtype != input.dtype or output.numel() != input.numel() * self._size:
            raise ValueError("%s: the output (%s, %d elements) is not %d ranks x the input (%s, %d elements)" %
                             (what, output.dtype, output.numel(), self._size, input.dtype, input.numel()))
        work = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        send, recv = _flat_bytes(input), as_bytes(work)
        call = (lambda comm, stream: lib.koloAllGather(ptr(send), ptr(recv), send.numel(), lib.koloUint8, comm,
                                                      stream)) if send.numel() else None

        def finish():
            if work is not output:
                output.copy_(work)
        return self._run([output, input], what, [call], finish, [output])

    allgather_into_tensor = _allgather_base

    def gather(self, output_tensor_lists, input_tensors, opts):
        what = "kolo backend: gather"
        input, root = self._one(input_tensors, what), opts.rootRank
        self._check_root(root, what)
        send = _flat_bytes(input)
        outputs = list(output_tensor_lists[0]) if output_tensor_lists else []
        recv = ffi.NULL
        if self._rank == root:
            if len(outputs) != self._size or any(o.numel() != input.numel() or o.dtype != input.dtype
                                                 for o in outputs):
                raise ValueError("%s: the root needs %d outputs of %s with the input's %d elements (kolo gathers "
                                 "equal sizes)" % (what, self._size, input.dtype, input.numel()))
            recv = torch.empty(self._size * send.numel(), dtype=torch.uint8, device=input.device)
        call = (lambda comm, stream: lib.koloGather(ptr(send), recv if recv is ffi.NULL else ptr(recv), send.numel(),
                                                   lib.koloUint8, root, comm, stream)) if send.numel() else None

        def finish():
            if self._rank == root and send.numel():
                for o, p in zip(outputs, recv.chunk(self._size)):
                    o.copy_(p.view(o.dtype).reshape(o.shape))
        return self._run([input] + outputs, what, [call], finish, outputs)

    def scatter(self, output_tensors, input_tensor_lists, opts):
        what = "kolo backend: scatter"
        output, root = self._one(output_tensors, what), opts.rootRank
        self._check_root(root, what)
        inputs = list(input_tensor_lists[0]) if input_tensor_lists else []
        send = ffi.NULL
        if self._rank == root:
            if len(inputs) != self._size or any(i.numel() != output.numel() or i.dtype != output.dtype
                                                for i in inputs):
                raise ValueError("%s: the root needs %d inputs of %s with the output's %d elements (kolo scatters "
                                 "equal sizes)" % (what, self._size, output.dtype, output.numel()))
            send = torch.cat([_flat_bytes(i) for i in inputs])
        work = output if output.is_contiguous() else torch.empty_like(output, memory_format=torch.contiguous_format)
        recv = as_bytes(work)
        call = (lambda comm, stream: lib.koloScatter(send if send is ffi.NULL else ptr(send), ptr(recv), recv.numel(),
                                                    lib.koloUint8, root, comm, stream)) if recv.numel() else None

        def finish():
            if work is not output:
                output.copy_(work)
        return self._run([output] + inputs, what, [call], finish, [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        what = "kolo backend: all_to_all_single"
        n = self._size
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.dim() == 0 or input.shape[0] % n:
                raise ValueError("%s: without splits, input and output need equal sizes with a first dimension that "
                                 "%d ranks divide" % (what, n))
            send = _flat_bytes(input)
            work = output if output.is_contiguous() else torch.empty_like(output,
                                                                         memory_format=torch.contiguous_format)
            recv = as_bytes(work)
            call = (lambda comm, stream: lib.koloAlltoAll(ptr(send), ptr(recv), send.numel() // n, lib.koloUint8,
                                                         comm, stream)) if send.numel() else None

            def finish():
                if work is not output:
                    output.copy_(work)
            return self._run([output, input], what, [call], finish, [output])
        ins = self._splits(input, input_split_sizes, what, "input")
        outs = self._splits(output, output_split_sizes, what, "output")
        return self.alltoall(outs, ins, opts, what=what, result=[output])

    def _splits(self, tensor, sizes, what, which):
        n = self._size
        if not sizes:
            if tensor.dim() == 0 or tensor.shape[0] % n:
                raise ValueError("%s: the %s's first dimension does not divide among %d ranks: give its splits" %
                                 (what, which, n))
            sizes = [tensor.shape[0] // n] * n
        sizes = [int(s) for s in sizes]
        if len(sizes) != n or min(sizes) < 0 or sum(sizes) != tensor.shape[0]:
            raise ValueError("%s: %s splits %s must be %d sizes adding up to its first dimension (%d)" %
                             (what, which, sizes, n, tensor.shape[0]))
        return list(tensor.split(sizes))

    def alltoall(self, output_tensors, input_tensors, opts=None, what="kolo backend: all_to_all", result=None):
        """Block j of the input to rank j, as sends and receives (sizes may differ)."""
        n = self._size
        if len(output_tensors) != n or len(input_tensors) != n:
            raise ValueError("%s: %d inputs and %d outputs for a group of %d ranks" %
                             (what, len(input_tensors), len(output_tensors), n))
        sends = [_flat_bytes(t) for t in input_tensors]
        recvs = [torch.empty(_nbytes(o), dtype=torch.uint8, device=o.device) for o in output_tensors]
        calls = [_send(s, j) for j, s in enumerate(sends) if s.numel()]
        calls += [_recv(r, i) for i, r in enumerate(recvs) if r.numel()]

        def finish():
            for o, r in zip(output_tensors, recvs):
                o.copy_(r.view(o.dtype).reshape(o.shape))
        return self._run(list(input_tensors) + list(output_tensors), what, calls, finish,
                         list(output_tensors) if result is None else result)

    def barrier(self, opts=None):
        one = torch.zeros(1, dtype=torch.uint8)
        return self._run([one], "kolo backend: barrier", [
            lambda comm, stream: lib.koloAllReduce(ptr(one), ptr(one), 1, lib.koloUint8, lib.koloSum, comm, stream)],
            None, [])

    # ---- point to point (kolo has no tags: messages between two ranks match in order)
    def _p2p(self, tensors, peer, what, send):
        tensor = self._one(tensors, what)
        if not 0 <= peer < self._size:
            raise ValueError("%s: peer %d is not a rank of this group (0..%d)" % (what, peer, self._size - 1))
        memory_kind([tensor], what)
        work = tensor if tensor.is_contiguous() else tensor.contiguous()
        buf = as_bytes(work)
        w = KoloWork([tensor], self, peer, None if send or work is tensor else (lambda: tensor.copy_(work)))
        self._queued.append(((_send if send else _recv)(buf, peer) if buf.numel() else None, w))
        return w

    def send(self, tensors, dst, tag=0):
        return self._p2p(tensors, dst, "kolo backend: send", True)

    def recv(self, tensors, src, tag=0):
        return self._p2p(tensors, src, "kolo backend: recv", False)

    def recv_anysource(self, tensors, tag=0):
        raise RuntimeError("kolo backend: recv from any source: kolo receives from a named rank only (give src)")

    # batch_isend_irecv: the queue is issued at the end of the batch
    def _start_coalescing(self, *args):
        pass

    def _end_coalescing(self, *args):
        self._flush()

    def monitored_barrier(self, *args, **kwargs):
        raise RuntimeError("kolo backend: monitored_barrier is Gloo's only; use barrier()")


_live = weakref.WeakSet()


@atexit.register
def _shutdown_all():
    for pg in list(_live):
        pg.shutdown()


def _create(store, rank, size, timeout):
    return KoloProcessGroup(store, rank, size, timeout)


def register():
    """Registers "kolo" with torch.distributed (once)."""
    if NAME.upper() in getattr(dist.Backend, "_plugins", {}):
        return
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        # PyTorch 2.x: the devices the backend serves (untested here: CI has 1.13).
        dist.Backend.register_backend(NAME, _create, devices=["cpu", "cuda"])
    else:
        dist.Backend.register_backend(NAME, _create)


def group_of(state):
    """The kolo process group a DDP hook state names, if any: the state
    itself, its process_group, or else the default group when it is kolo's
    and kolo.torch.init() was not called."""
    if isinstance(state, KoloProcessGroup):
        return state
    pg = getattr(state, "process_group", None)
    if pg is not None:
        if not isinstance(pg, KoloProcessGroup):
            raise ValueError("kolo.torch.kolo_hook: process_group is not a group of the \"kolo\" backend (%r)" % pg)
        return pg
    if not _comms.initialized() and dist.is_initialized():
        default = dist.distributed_c10d._get_default_group()
        if isinstance(default, KoloProcessGroup):
            return default
    return None
