# nn_cuda_emu_test: nn_cuda_test run against the cuda backend's own sources
# (src/nn/cuda/*.cu) compiled as C++ over a CPU emulation of the CUDA
# runtime and cuBLAS (src/nn/cuda/emu/), so the kernels and the host code
# of the backend are exercised on every machine, GPU or not. nn_cuda_test
# itself stays the real-GPU test (skipped here without one).
# x86-64 only (the emulator's fiber switch); not under the sanitizers
# (ASan does not follow hand-made stack switches).
find_package(Python3 COMPONENTS Interpreter)
include(CheckLanguage)
check_language(CXX)
if(Python3_Interpreter_FOUND AND CMAKE_CXX_COMPILER AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64" AND NOT SL_SANITIZE
   AND NOT SL_FUZZ)
  enable_language(CXX)
  set(SL_EMU_DIR ${PROJECT_SOURCE_DIR}/src/nn/cuda/emu)
  file(GLOB SL_EMU_CU CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/nn/cuda/*.cu)
  set(SL_EMU_GENERATED)
  foreach(cu ${SL_EMU_CU})
    get_filename_component(stem ${cu} NAME_WE)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu/${stem}.cc)
    add_custom_command(OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/cuda_emu
      COMMAND Python3::Interpreter ${SL_EMU_DIR}/translate.py ${cu} ${out}
      DEPENDS ${cu} ${SL_EMU_DIR}/translate.py
      COMMENT "translating ${stem}.cu for the CUDA emulator")
    list(APPEND SL_EMU_GENERATED ${out})
  endforeach()
  add_library(starling_cuda_emu SHARED ${SL_EMU_GENERATED} ${SL_EMU_DIR}/emu.cc)
  target_include_directories(starling_cuda_emu BEFORE PRIVATE
    ${SL_EMU_DIR} ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(starling_cuda_emu PRIVATE -O2 -U_FORTIFY_SOURCE)
  set_target_properties(starling_cuda_emu PROPERTIES
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF
    CXX_VISIBILITY_PRESET hidden
    LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
  add_dependencies(nn_cuda_test starling_cuda_emu)
  add_test(NAME nn_cuda_emu_test COMMAND nn_cuda_test WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(nn_cuda_emu_test PROPERTIES LABELS unit TIMEOUT 300
    ENVIRONMENT "SL_SOURCE_DIR=${PROJECT_SOURCE_DIR};SL_BUILD_DIR=${PROJECT_BINARY_DIR};SL_CUDA_BACKEND=${PROJECT_BINARY_DIR}/libstarling_cuda_emu.so")
endif()
