# Finds libzmq and libsodium. By default (SL_STATIC_ZMQ) they are linked
# from Debian's static archives, with the parts of libstdc++ and of
# libzmq's PGM and NORM transports that libzmq uses: a peer then maps
# only the code it needs instead of four shared libraries, about 1.5 MB
# less resident memory per peer (docs/adr/0006-static-zeromq.md). The
# GSSAPI and libbsd functions libzmq references but Starling never calls
# come from src/platform/zmq_static_shims.c, so no Kerberos library is
# loaded either (0.7 MB more). Where an
# archive is missing, or with sanitizers, the shared libraries are used.
# Either way the result is the target starling_zmq, and starling_sodium
# for libsodium alone (the library's base, src/base/, needs it without
# ZeroMQ: src/CMakeLists.txt).
option(SL_STATIC_ZMQ "link libzmq and libsodium statically (smaller peers; see docs/adr/0006)" ON)
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
add_library(starling_zmq INTERFACE)
add_library(starling_sodium INTERFACE)
set(SL_ZMQ_LINK shared)
if(SL_STATIC_ZMQ AND NOT SL_SANITIZE)
  foreach(lib zmq sodium pgm norm protokit)
    find_library(SL_${lib}_A NAMES lib${lib}.a)
  endforeach()
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE SL_STDCXX_A OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_path(SL_GSSAPI_H gssapi/gssapi.h)
  if(SL_zmq_A AND SL_sodium_A AND SL_pgm_A AND SL_norm_A AND SL_protokit_A AND
     EXISTS "${SL_STDCXX_A}" AND SL_GSSAPI_H)
    add_library(starling_zmq_shims STATIC ${CMAKE_CURRENT_LIST_DIR}/../src/platform/zmq_static_shims.c)
    target_include_directories(starling_zmq_shims PRIVATE ${SL_GSSAPI_H})
    # imported targets, so that the link line has libsodium.a after
    # libzmq.a, which calls it, whichever of the library's archives named
    # sodium first (starling_base does, for its own use)
    add_library(starling_sodium_a STATIC IMPORTED)
    set_target_properties(starling_sodium_a PROPERTIES IMPORTED_LOCATION ${SL_sodium_A})
    target_link_libraries(starling_sodium INTERFACE starling_sodium_a)
    target_include_directories(starling_sodium INTERFACE ${SODIUM_INCLUDE_DIRS})
    add_library(starling_zmq_a STATIC IMPORTED)
    set_target_properties(starling_zmq_a PROPERTIES IMPORTED_LOCATION ${SL_zmq_A}
      INTERFACE_LINK_LIBRARIES
      "${SL_norm_A};${SL_protokit_A};${SL_pgm_A};starling_sodium;${SL_STDCXX_A};starling_zmq_shims;rt")
    target_link_libraries(starling_zmq INTERFACE starling_zmq_a)
    target_include_directories(starling_zmq INTERFACE ${ZMQ_INCLUDE_DIRS})
    set(SL_ZMQ_LINK static)
  endif()
endif()
if(SL_ZMQ_LINK STREQUAL shared)
  target_link_libraries(starling_sodium INTERFACE PkgConfig::SODIUM)
  target_link_libraries(starling_zmq INTERFACE PkgConfig::ZMQ starling_sodium)
endif()
message(STATUS "starling: libzmq and libsodium linked ${SL_ZMQ_LINK}")
