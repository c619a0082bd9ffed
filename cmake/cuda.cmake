# Detects the CUDA toolkit (nvcc and cuBLAS). Its absence never breaks the
# build: the cpu backend is always built, the cuda one only when found. The
# result is recorded in SL_HAVE_CUDA and printed, for the training issue.
set(SL_HAVE_CUDA OFF)
if(SL_WITH_CUDA AND NOT SL_SANITIZE)
  find_program(SL_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
  find_library(SL_CUBLAS cublas HINTS /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  if(SL_NVCC AND SL_CUBLAS)
    set(CMAKE_CUDA_COMPILER ${SL_NVCC})
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      enable_language(CUDA)
      set(SL_HAVE_CUDA ON)
    endif()
  endif()
endif()
message(STATUS "starling: cuda backend ${SL_HAVE_CUDA}")
