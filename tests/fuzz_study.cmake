# The study decoders' fuzz target (tests/fuzz/fuzz_study.c):
#   fuzz_study_replay   replays tests/fuzz/corpus/study and
#                       tests/fuzz/regressions/study (ctest, label "fuzz")
#   fuzz_study          the libFuzzer binary, with -DSL_FUZZ=ON and clang:
#     build-fuzz/tests/fuzz_study tests/fuzz/corpus/study
add_executable(fuzz_study_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_study.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c)
target_link_libraries(fuzz_study_replay PRIVATE starling)
target_include_directories(fuzz_study_replay PRIVATE ${PROJECT_SOURCE_DIR}/src)
add_test(NAME fuzz_study_replay
  COMMAND fuzz_study_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/study
          ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/regressions/study
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(fuzz_study_replay PROPERTIES LABELS fuzz TIMEOUT 300)
if(SL_FUZZ)
  set(sl_fuzz_study_flags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  add_executable(fuzz_study ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_study.c)
  target_compile_options(fuzz_study PRIVATE ${sl_fuzz_study_flags})
  target_link_options(fuzz_study PRIVATE ${sl_fuzz_study_flags})
  target_link_libraries(fuzz_study PRIVATE starling)
  target_include_directories(fuzz_study PRIVATE ${PROJECT_SOURCE_DIR}/src)
endif()
