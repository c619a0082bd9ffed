# install_test: `cmake --install` into a temporary prefix, then a program
# built against it with pkg-config alone (tests/install_test.sh). It installs
# what the build holds: libstarling.a must be built.
add_test(NAME install_test COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh
         ${PROJECT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(install_test PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77)
