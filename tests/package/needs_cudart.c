/* needs_cudart.c - linked against libcudart.so by tests/check_install.sh:
 * it must fail to start where that script hides the CUDA runtime, which
 * shows that kolo's programs running there do not load it. */
int cudaRuntimeGetVersion(int *version); /* cuda_runtime_api.h's */

int main(void) {
  int v = 0;
  return cudaRuntimeGetVersion(&v) != 0;
}
