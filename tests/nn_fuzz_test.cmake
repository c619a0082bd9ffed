set_tests_properties(nn_fuzz_test PROPERTIES LABELS "unit;fuzz")
