# layers_test: tools/layers over this build's objects of the library: no
# circle of files and no call or include running back up the subsystem
# layers of src/ (docs/house.md). Under a second; it needs python3 and nm.
# layers_selftest: the tool finds a planted circle, upward call and include
# in a small tree of its own (a few seconds: it compiles six tiny files).
find_program(SL_PYTHON3 python3)
if(SL_PYTHON3)
  add_test(NAME layers_test COMMAND ${SL_PYTHON3} ${PROJECT_SOURCE_DIR}/tools/layers
           ${PROJECT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME layers_selftest COMMAND bash ${PROJECT_SOURCE_DIR}/tests/layers_selftest.sh
           WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(layers_test layers_selftest PROPERTIES LABELS unit TIMEOUT 60
    ENVIRONMENT "CC=${CMAKE_C_COMPILER}")
endif()
