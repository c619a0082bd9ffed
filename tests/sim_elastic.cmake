# sim_elastic_test: 150 seeds of up to 50 s of simulated time each take
# ~6 s in a release build and ~25 s of CPU under ASan (minutes of wall
# time on a loaded machine); give it room.
if(TEST sim_elastic_test)
  set_tests_properties(sim_elastic_test PROPERTIES TIMEOUT 600)
endif()
