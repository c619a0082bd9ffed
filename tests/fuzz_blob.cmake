# The blob transfer's fuzz target (tests/fuzz/fuzz_blob.c), kept beside the
# blob tests so tests/fuzz/CMakeLists.txt needs no edit:
#   fuzz_blob_replay   replays tests/fuzz/corpus/blob and
#                      tests/fuzz/regressions/blob (ctest, label "fuzz")
#   fuzz_blob          the libFuzzer binary, with -DSL_FUZZ=ON and clang:
#     build-fuzz/tests/fuzz_blob tests/fuzz/corpus/blob
add_executable(fuzz_blob_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_blob.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
target_link_libraries(fuzz_blob_replay PRIVATE starling)
add_test(NAME fuzz_blob_replay
  COMMAND fuzz_blob_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/blob
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/blob
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(fuzz_blob_replay PROPERTIES LABELS fuzz TIMEOUT 300)
if(SL_FUZZ)
  set(sl_fuzz_blob_flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  # the decoders are compiled in, instrumented; the rest comes from the library
  add_executable(fuzz_blob ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_blob.c
    ${PROJECT_SOURCE_DIR}/src/blob_xfer.c ${PROJECT_SOURCE_DIR}/src/blob.c
    ${PROJECT_SOURCE_DIR}/src/mpack.c)
  target_include_directories(fuzz_blob PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(fuzz_blob PRIVATE ${sl_fuzz_blob_flags})
  target_link_options(fuzz_blob PRIVATE ${sl_fuzz_blob_flags})
  target_link_libraries(fuzz_blob PRIVATE starling)
endif()

# The blob disk benchmark (bench/blob/disk_bench.c, run by bench/blob/run.py)
# is built here too, beside peer, so that no other CMake file needs an edit.
if(EXISTS ${PROJECT_SOURCE_DIR}/bench/blob/CMakeLists.txt)
  add_subdirectory(${PROJECT_SOURCE_DIR}/bench/blob ${CMAKE_CURRENT_BINARY_DIR}/bench_blob)
endif()
