# tests/cuda_sets.sh - the sets of CUDA tests that tests/run_all.sh runs on
# the CPU model of the GPU under each of the model's modes, as ctest -R
# regular expressions; sourced by run_all.sh and tests/cuda_seed_sweep.sh.
# shellcheck disable=SC2034  # read by the scripts that source this file
# shellcheck shell=bash

# The CUDA tests, on the CPU model: the ranks share its 2 model devices, so
# every rank gets its own hardware queue (CUDA_DEVICE_MAX_CONNECTIONS, set by
# test_e2e_cuda itself too).
CUDA_TESTS='^(Cuda|AllTypesOps/CudaReduceTest|FusionCuda|NcclLayer|NcclEnv|NcclProcs|NcclDlopen|Examples/SchedFileCuda)'
# Under TSan: the reduce kernels on one type and op (a bfloat16 average, a
# conversion each way: ~30 s under TSan; an integer max added nothing TSan
# could see that this does not), and the executor's small grids of 3 ranks
# with each rank on its own thread (every collective, SIMPLE and LL), the
# all-reduce of 2 (a block's send and receive ends on one peer), the
# all-reduce of one thread driving all its ranks, all-to-all and gather
# of 3 ranks (a block moving between its peers' pipes), the doubling
# all-reduces of 3 ranks (a fold, SRC_FIRST reductions, LL and SIMPLE), abort,
# a timeout from each source and protocol once, a mismatch of each kind
# (count, dtype, across protocols, all-to-all) and the stall warning (its
# watcher thread).  The release run on the model covers every other
# combination; these are the ones whose threads differ.  ctest's names of
# parameterized cases end in a comment ("  # GetParam() = ..."): an anchor
# at a case's end is "( |$)", not "$".
CUDA_TSAN_TESTS='CudaReduceTest.MatchesReference/bfloat16_avg( |$)|CudaGrid.SmallCounts/.*_3ranks_threads|CudaGrid.SmallCounts/AllReduce_2ranks_threads|CudaGrid.SmallCounts/AllReduce_3ranks_onethread|CudaPeerGrid.SmallCounts/(AlltoAll|Gather)_3ranks|CudaAlgoBits.*/(rd|rabenseifner)_3ranks|CudaAbort|CudaTimeout.*/(ConfigTimeoutMs_LL|KoloTimeoutMsEnv_Simple)( |$)|CudaThreads/CudaMismatch.*/(CountSimple3|DtypeLL2|CountAcrossProtocols2|AllToAllDtypeLL3)( |$)|CudaStallWarning'
# With the GPU's block of 256 threads and with 33 (a warp and one lane):
# every collective of 2 and 3 ranks, the multi-peer ones, the doubling
# all-reduces, reduce kernels, abort, timeout, mismatch and the stall
# warning (read by warp leaders), and the model's own block checks.
CUDA_BLOCK_TESTS='CudaGrid.SmallCounts/.*_[23]ranks_|CudaPeerGrid.SmallCounts/.*_3ranks|AllTypesOps/CudaReduceTest.MatchesReference/(int8_max|float32_sum|bfloat16_avg|float64_copy|int32_premulsum|float16_avg)( |$)|CudaAlgoBits.*/(rd|rabenseifner)_3ranks|CudaAbort|CudaTimeout|CudaThreads/CudaMismatch|CudaStallWarning|CudaSimBlocks'
# With 33: the tails of strides and a warp of one lane, on fewer cases.
CUDA_BLOCK33_TESTS='CudaGrid.SmallCounts/.*_[23]ranks_|AllTypesOps/CudaReduceTest.MatchesReference/(int8_max|float32_sum|bfloat16_avg|float16_avg)( |$)|CudaSimBlocks'
# Under seeded orders (KOLO_SIM_SEED: the order of a block's threads, of
# block placement, small pauses): every kind of collective, 2 and 3 ranks,
# both issue modes among them, the multi-peer ones and the doubling
# all-reduces; 20 cases, ~5 s per seed on 2 cores.  One alternative per
# case, each ending in the space before ctest's "# GetParam()" comment
# (CMake's regular expressions take few groups).
CUDA_SEED_TESTS='SmallCounts/AllReduce_2ranks_threads |SmallCounts/AllReduce_3ranks_onethread |SmallCounts/AllReduce_3ranks_threads |SmallCounts/ReduceScatter_2ranks_onethread |SmallCounts/ReduceScatter_3ranks_threads |SmallCounts/AllGather_2ranks_threads |SmallCounts/AllGather_3ranks_onethread |SmallCounts/AllGather_3ranks_threads |SmallCounts/Broadcast_3ranks_threads |SmallCounts/Reduce_3ranks_onethread |SmallCounts/SendRecv_2ranks_threads |SmallCounts/SendRecv_3ranks_onethread |SmallCounts/AlltoAll_3ranks_threads |SmallCounts/Gather_3ranks_onethread |SmallCounts/Scatter_3ranks_threads |SmallCounts/Bcast_3ranks_onethread |CudaP2P.AllToAll/2ranks_threads |CudaP2P.AllToAll/3ranks_onethread |CudaAlgoBits.*/rd_3ranks |CudaAlgoBits.*/rabenseifner_3ranks '
# In the weak-memory mode (KOLO_SIM_WEAK: stores land late and out of order
# unless a fence or release orders them): the seeded set, whose calls are
# mostly LL-sized, and SIMPLE-sized calls of 2 ranks around the switch, whose
# slices go through peers' buffers published by the executor's release
# (without its fence and release, these and the all-to-alls read stale
# slices here).
CUDA_WEAK_TESTS="${CUDA_SEED_TESTS}|ProtocolSwitch.AroundLLThreshold/AllReduce_2ranks |ProtocolSwitch.AroundLLThreshold/ReduceScatter_2ranks |ProtocolSwitch.AroundLLThreshold/AllGather_2ranks "
# With CUDA's default 8 hardware queues (the other steps give every stream
# its own): 4 ranks' 8 streams share them with the legacy stream (~8 s), and
# the runtime's stream rules (test_cuda_runtime_rules, which perf/run_cuda.sh
# runs on a GPU with 8 queues too).
CUDA_QUEUE8_TESTS='SmallCounts/.*_4ranks_|SmallCounts/AllReduce_3ranks_|SmallCounts/AlltoAll_3ranks_|CudaP2P.AllToAll/4ranks_|CudaRulesStreams\.'
# Ranks as processes on the model's GPUs, under each KOLO_SIM_SHARE (MPS:
# processes share a device's SMs; time slices: a device per process, as
# kolo refuses processes sharing one), and the model's and kolo's own
# cases of shared devices (both modes: 26 s on 2 quiet cores, 52 s at a load of 10).
CUDA_SHARE_TESTS='^(CudaProcs\.Grid/[234]procs|CudaProcsTimeout|CudaMismatchProcs|CudaSimShare\.|CudaSharedGpu\.|NcclProcs\.)'
