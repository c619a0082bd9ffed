# The store's fuzz target (tests/fuzz/fuzz_store.c), kept beside the store
# tests so tests/fuzz/CMakeLists.txt needs no edit:
#   fuzz_store_replay   replays tests/fuzz/corpus/store and
#                       tests/fuzz/regressions/store (ctest, label "fuzz")
#   fuzz_store          the libFuzzer binary, with -DSL_FUZZ=ON and clang:
#     build-fuzz/tests/fuzz_store tests/fuzz/corpus/store
add_executable(fuzz_store_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_store.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
target_link_libraries(fuzz_store_replay PRIVATE starling)
add_test(NAME fuzz_store_replay
  COMMAND fuzz_store_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/store
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/store
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(fuzz_store_replay PROPERTIES LABELS fuzz TIMEOUT 300)
if(SL_FUZZ)
  set(sl_fuzz_store_flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  add_executable(fuzz_store ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_store.c)
  target_compile_options(fuzz_store PRIVATE ${sl_fuzz_store_flags})
  target_link_options(fuzz_store PRIVATE ${sl_fuzz_store_flags})
  target_link_libraries(fuzz_store PRIVATE starling)
endif()
