# sim_store_test: 200 seeds of 12 s of faults each take ~8 s in a release
# build and ~60 s under ASan; give it room.
if(TEST sim_store_test)
  set_tests_properties(sim_store_test PROPERTIES TIMEOUT 600)
endif()
