# `cmake --install BUILD --prefix DIR`: the library's three archives
# (libstarling.a over libstarling_nn.a, the training engine, over
# libstarling_base.a: src/CMakeLists.txt), the cuda backend
# libstarling_cuda.so where it was built, the public headers
# (include/starling/, under starling.h) and two pkg-config files:
# starling.pc (all of it) and starling_nn.pc (the engine alone)
# (docs/embedding.md). tests/install_test.sh installs into a temporary
# prefix and builds a program against each.
include(GNUInstallDirs)

install(TARGETS starling starling_nn starling_base ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET starling_cuda)
  # dlopen()ed at run time, found beside a program's bin/ in ../lib
  # (src/nn/backend.c) or by the loader's search path
  # (OPTIONAL: a build of the library alone, --target starling, installs
  # without it)
  install(TARGETS starling_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} OPTIONAL)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/starling
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# The .pc file finds the prefix from where it lies (${pcfiledir}), so one
# built for /usr/local works when installed with --prefix elsewhere.
set(SL_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${SL_PC_DIR}")
  set(SL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(SL_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH SL_PC_UP /prefix/${SL_PC_DIR} /prefix)
  string(REGEX REPLACE "/$" "" SL_PC_UP "${SL_PC_UP}")
  set(SL_PC_PREFIX "\${pcfiledir}/${SL_PC_UP}")
  set(SL_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(SL_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(SL_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
# A library built with the sanitizers needs their run times in the program.
set(SL_PC_SANITIZE "")
if(SL_SANITIZE)
  set(SL_PC_SANITIZE "-fsanitize=address,undefined")
endif()
foreach(pc starling starling_nn)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${SL_PC_DIR})
endforeach()
