/* ncu_err: cudaError_t, cublasStatus_t and cudnnStatus_t into fb_code, each in
 * exactly one place (docs/STYLE.md 3).  Out-of-memory always becomes FB_EOOM so a
 * job that runs out of device memory gets status oom, not error. */
#include <cublasLt.h>
#include <cuda_runtime.h>

#ifdef NCU_HAVE_CUDNN
#include <cudnn.h>
#endif

#include "ncu.h"

fb_code ncu_cuda_check(int status, const char *what, fb_err *err)
{
    cudaError_t e = (cudaError_t)status;
    if (e == cudaSuccess)
        return FB_OK;
    fb_code code = FB_EDEVICE;
    if (e == cudaErrorMemoryAllocation)
        code = FB_EOOM;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
        code = FB_EUNSUPPORTED;
    return fb_err_set(err, code, NULL, "%s: CUDA %s (%s)", what, cudaGetErrorName(e),
                      cudaGetErrorString(e));
}

fb_code ncu_cublas_check(int status, const char *what, fb_err *err)
{
    cublasStatus_t s = (cublasStatus_t)status;
    if (s == CUBLAS_STATUS_SUCCESS)
        return FB_OK;
    fb_code code = FB_EDEVICE;
    if (s == CUBLAS_STATUS_ALLOC_FAILED)
        code = FB_EOOM;
    else if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH)
        code = FB_EUNSUPPORTED;
    return fb_err_set(err, code, NULL, "%s: cuBLASLt status %d", what, status);
}

#ifdef NCU_HAVE_CUDNN
fb_code ncu_cudnn_check(int status, const char *what, fb_err *err)
{
    cudnnStatus_t s = (cudnnStatus_t)status;
    if (s == CUDNN_STATUS_SUCCESS)
        return FB_OK;
    fb_code code = FB_EDEVICE;
    if (s == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
        s == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED)
        code = FB_EOOM;
    else if (CUDNN_STATUS_CATEGORY(s) == CUDNN_STATUS_NOT_SUPPORTED)
        code = FB_EUNSUPPORTED;
    return fb_err_set(err, code, NULL, "%s: cuDNN %s", what, cudnnGetErrorString(s));
}
#else
fb_code ncu_cudnn_check(int status, const char *what, fb_err *err)
{
    return status == 0 ? FB_OK
                       : fb_err_set(err, FB_EUNSUPPORTED, NULL, "%s: built without cuDNN", what);
}
#endif
