# elastic_nccl_test runs against the real libnccl and a real GPU (a world
# of one; skipped without a GPU). elastic_nccl_emu_test runs the same
# test's multi-rank cases on any machine: the cuda backend over the CUDA
# emulator (tests/nn_cuda_test.cmake builds libstarling_cuda_emu.so) and
# NCCL's calls over libnccl_emu.so (src/nn/cuda/emu/nccl_emu.c, sockets on
# 127.0.0.1), the ranks in separate processes (the emulator runs one
# thread's kernels at a time).
if(NOT SL_FUZZ)
  add_library(nccl_emu SHARED ${PROJECT_SOURCE_DIR}/src/nn/cuda/emu/nccl_emu.c)
  set_target_properties(nccl_emu PROPERTIES C_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  target_link_libraries(nccl_emu PRIVATE pthread)
  add_dependencies(elastic_nccl_test nccl_emu)
  set_tests_properties(elastic_nccl_test PROPERTIES TIMEOUT 120)
  # the conditions tests/nn_cuda_test.cmake builds the CUDA emulator under
  find_package(Python3 COMPONENTS Interpreter)
  include(CheckLanguage)
  check_language(CXX)
  if(Python3_Interpreter_FOUND AND CMAKE_CXX_COMPILER AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64"
     AND NOT SL_SANITIZE)
    add_dependencies(elastic_nccl_test starling_cuda_emu)
    add_test(NAME elastic_nccl_emu_test COMMAND elastic_nccl_test WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(elastic_nccl_emu_test PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77
      ENVIRONMENT "SL_SOURCE_DIR=${PROJECT_SOURCE_DIR};SL_BUILD_DIR=${PROJECT_BINARY_DIR};SL_CUDA_BACKEND=${PROJECT_BINARY_DIR}/libstarling_cuda_emu.so;STARLING_NCCL_LIB=${PROJECT_BINARY_DIR}/libnccl_emu.so")
  endif()
endif()
