# install_test: `cmake --install` into a temporary prefix, then programs
# built against it with pkg-config alone (tests/install_test.sh). It installs
# what the build holds: libstarling.a must be built.
add_test(NAME install_test COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh
         ${PROJECT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(install_test PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)

# install_nn_test: the training engine alone, in the build tree: a program
# linked against starling_nn (and through it starling_base) and nothing
# else, so a call from nn/ into the peer's layers fails its link
# (tests/install_test_nn.c; install_test builds it against an install too).
add_executable(install_test_nn ${CMAKE_CURRENT_SOURCE_DIR}/install_test_nn.c)
target_link_libraries(install_test_nn PRIVATE starling_nn)
add_test(NAME install_nn_test COMMAND sh -c
         "d=$(mktemp -d /tmp/sl-nn-alone.XXXXXX) && \"$0\" \"$d/ckpt\"; rc=$?; rm -rf \"$d\"; exit $rc"
         $<TARGET_FILE:install_test_nn>)
set_tests_properties(install_nn_test PROPERTIES LABELS unit TIMEOUT 60)
