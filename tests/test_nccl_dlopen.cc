// test_nccl_dlopen.cc - kolo's libnccl.so.2 loaded the way frameworks load
// NCCL: dlopen("libnccl.so.2") by its SONAME from a program that does not
// link it, every function through dlsym.  (Its runpath holds kolo's build
// tree, as a framework's LD_LIBRARY_PATH would.)  Types from the CUDA
// toolkit's nccl.h.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <vector>

namespace {

struct Nccl {
  void *h = nullptr;
  ncclResult_t (*getVersion)(int *);
  ncclResult_t (*commInitAll)(ncclComm_t *, int, const int *);
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
  ncclResult_t (*commDestroy)(ncclComm_t);
  const char *(*getLastError)(ncclComm_t);
  ~Nccl() {
    if (h) dlclose(h);
  }
};

template <typename F>
void sym(void *h, const char *name, F *f) {
  *f = reinterpret_cast<F>(dlsym(h, name));
  ASSERT_NE(*f, nullptr) << name << ": " << dlerror();
}

void load(Nccl *n) {
  n->h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(n->h, nullptr) << dlerror();
  sym(n->h, "ncclGetVersion", &n->getVersion);
  sym(n->h, "ncclCommInitAll", &n->commInitAll);
  sym(n->h, "ncclAllReduce", &n->allReduce);
  sym(n->h, "ncclGroupStart", &n->groupStart);
  sym(n->h, "ncclGroupEnd", &n->groupEnd);
  sym(n->h, "ncclCommDestroy", &n->commDestroy);
  sym(n->h, "ncclGetLastError", &n->getLastError);
}

TEST(NcclDlopen, BySonameIsKolosLayer) {
  Nccl n;
  load(&n);
  if (HasFatalFailure()) return;
  Dl_info info;
  ASSERT_NE(dladdr(reinterpret_cast<void *>(n.getVersion), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find(KOLO_NCCL_BUILD_DIR), std::string::npos) << info.dli_fname;
  int v = 0;
  EXPECT_EQ(n.getVersion(&v), ncclSuccess);
  EXPECT_EQ(v, NCCL_VERSION(2, 28, 9));
}

// Two ranks (one per device) from ncclCommInitAll; an all-reduce of small
// integers in float32 is exact: every element checked.
TEST(NcclDlopen, AllReduceThroughDlsym) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  Nccl n;
  load(&n);
  if (HasFatalFailure()) return;
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(n.commInitAll(comms, 2, nullptr), ncclSuccess) << n.getLastError(nullptr);
  const size_t count = 10007;
  float *buf[2];
  std::vector<float> in[2];
  for (int r = 0; r < 2; r++) {
    in[r].resize(count);
    for (size_t i = 0; i < count; i++) in[r][i] = (float)((i * 7 + (size_t)r * 13) % 1000) - 500.0f;
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaMalloc((void **)&buf[r], count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(buf[r], in[r].data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(n.groupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(n.allReduce(buf[r], buf[r], count, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess)
        << n.getLastError(comms[r]);
  }
  ASSERT_EQ(n.groupEnd(), ncclSuccess) << n.getLastError(nullptr);
  for (int r = 0; r < 2; r++) {
    std::vector<float> got(count);
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), buf[r], count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    size_t wrong = 0;
    for (size_t i = 0; i < count; i++) wrong += got[i] != in[0][i] + in[1][i];
    EXPECT_EQ(wrong, 0u) << "rank " << r;
    cudaFree(buf[r]);
    EXPECT_EQ(n.commDestroy(comms[r]), ncclSuccess);
  }
}

}  // namespace
