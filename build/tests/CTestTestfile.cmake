# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test([=[base_test]=] "/work/main/build/tests/base_test")
set_tests_properties([=[base_test]=] PROPERTIES  ENVIRONMENT "SL_SOURCE_DIR=/work/main;SL_BUILD_DIR=/work/main/build" LABELS "unit" SKIP_RETURN_CODE "77" TIMEOUT "300" WORKING_DIRECTORY "/work/main" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;17;add_test;/work/main/tests/CMakeLists.txt;0;")
