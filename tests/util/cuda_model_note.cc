// cuda_model_note.cc - linked into every test binary of a -DKOLO_CUDA=SIM
// build (tests/CMakeLists.txt): says at the start of the run that its CUDA
// tests run on kolo's CPU model of the GPU, so no output of such a run can
// be read as a GPU's (docs/dev/cuda-model.md).
#include <gtest/gtest.h>

#include <cstdio>

namespace {

class CudaModelNote : public ::testing::Environment {
 public:
  void SetUp() override {
    std::printf("[ CUDA     ] on kolo's CPU model of the GPU (cudasim, docs/dev/cuda-model.md): not a GPU, "
                "no GPU timing\n");
  }
};

const ::testing::Environment *const kNote = ::testing::AddGlobalTestEnvironment(new CudaModelNote);

}  // namespace
