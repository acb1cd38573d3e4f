// device_guard.h - what a CUDA test does when it sees fewer devices than it
// needs.  With real CUDA that is a machine without a GPU (CI has none): the
// test skips, saying why.  On kolo's CPU model of the GPU (a -DKOLO_CUDA=SIM
// build, KOLO_CUDA_SIM) the devices are the model's own, so a missing one
// is a broken model or a run started without devices (KOLO_SIM_GPUS=0): the
// test fails, or a CI run of the CUDA tests could pass with none of them run.
// Needs no CUDA header.
#ifndef KOLO_TESTS_UTIL_DEVICE_GUARD_H
#define KOLO_TESTS_UTIL_DEVICE_GUARD_H

#include <gtest/gtest.h>

#include <cstdlib>

#ifdef KOLO_CUDA_SIM
#define KT_NO_DEVICE(why)                                                                 \
  GTEST_FAIL() << "the CUDA model shows no usable device (" << why                        \
               << "): on the model that is a failure, not a skip (KOLO_SIM_GPUS="        \
               << (std::getenv("KOLO_SIM_GPUS") ? std::getenv("KOLO_SIM_GPUS") : "unset") \
               << ")"
#else
#define KT_NO_DEVICE(why) GTEST_SKIP() << why
#endif

#endif  // KOLO_TESTS_UTIL_DEVICE_GUARD_H
