# Helpers that build ppc's libraries and record them for the PPCTargets export set,
# so that another CMake project can `find_package(PPC)` and link them.

# An MLIR-dependent library (dialects, passes, importer). Arguments are those of
# add_mlir_library; MLIR's own install rules are disabled in favour of ours.
function(ppc_add_mlir_library name)
  add_mlir_library(${name} DISABLE_INSTALL ${ARGN})
  target_include_directories(${name} INTERFACE $<INSTALL_INTERFACE:include>)
  set_property(GLOBAL APPEND PROPERTY PPC_EXPORTS ${name})
endfunction()

# An MLIR-free library (simulator, search, runtime): plain C++17.
#   ppc_add_library(name SOURCES a.cpp ... [LINK libs...])
function(ppc_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINK" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_include_directories(${name} PUBLIC
    $<BUILD_INTERFACE:${PPC_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:include>)
  target_link_libraries(${name} PUBLIC ${ARG_LINK})
  # Exceptions stay enabled here: these libraries are not MLIR code.
  target_compile_options(${name} PRIVATE -fexceptions)
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  set_property(GLOBAL APPEND PROPERTY PPC_EXPORTS ${name})
endfunction()
