/* A stand-in libcuda.so.1 for machines without an NVIDIA driver.
 *
 * PyPI's sglang-kernel is built against CUDA only, and its shared object needs libcuda.so.1
 * (for cuPointerGetAttribute) just to load, even when SGLang runs on the CPU
 * (SGLANG_USE_CPU_ENGINE=1) and never calls it. Every entry point here answers
 * CUDA_ERROR_NO_DEVICE, so anything that does ask finds no GPU, and torch's own check
 * (through libcudart) still reports CUDA as unavailable.
 *
 * Built by scripts/install-sglang-cpu.sh: cc -shared -fPIC -o libcuda.so.1 libcuda-stub.c
 */
typedef int CUresult;
enum { CUDA_ERROR_NO_DEVICE = 100 };

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDriverGetVersion(int *version) { if (version) *version = 0; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDeviceGetCount(int *count) { if (count) *count = 0; return CUDA_ERROR_NO_DEVICE; }
CUresult cuDeviceGet(int *device, int ordinal) { (void)device; (void)ordinal; return CUDA_ERROR_NO_DEVICE; }
CUresult cuGetErrorString(CUresult error, const char **text) {
    (void)error;
    if (text) *text = "no CUDA device (libcuda stub for CPU-only machines)";
    return 0;
}
CUresult cuPointerGetAttribute(void *data, int attribute, unsigned long long pointer) {
    (void)data; (void)attribute; (void)pointer;
    return CUDA_ERROR_NO_DEVICE;
}
