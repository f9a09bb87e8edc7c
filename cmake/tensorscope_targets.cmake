# Helpers every CMakeLists.txt of the project uses (included by the top-level one).

# tensorscope_target_warnings(<target>): the project's warnings, on one target. A switch over
# an enum that misses one of its values fails the build, so every switch over a vocabulary
# (render modes, config choices) stays complete when a value is added. CUDA sources get
# them through nvcc's host compiler.
function(tensorscope_target_warnings target)
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wno-unused-parameter;-Werror=switch>"
    "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter,-Werror=switch>")
endfunction()

# tensorscope_add_gtest(<name> SOURCES <file>... LIBRARIES <lib>...
#                       [INCLUDES <dir>...] [DEFINITIONS <def>...] [DEPENDS <target>...]
#                       [TEST_PREFIX <prefix>] [TIMEOUT <s>] [DISCOVERY_TIMEOUT <s>])
# One GoogleTest executable whose tests ctest discovers: linked with GoogleTest/GoogleMock
# and tests/support, with the project's warnings. DEPENDS: targets the tests run (their
# paths passed in DEFINITIONS as $<TARGET_FILE:...>).
function(tensorscope_add_gtest name)
  cmake_parse_arguments(ARG "" "TEST_PREFIX;TIMEOUT;DISCOVERY_TIMEOUT"
                        "SOURCES;LIBRARIES;INCLUDES;DEFINITIONS;DEPENDS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES} tensorscope_test_support
                        GTest::gmock GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${ARG_INCLUDES})
  target_compile_definitions(${name} PRIVATE ${ARG_DEFINITIONS})
  tensorscope_target_warnings(${name})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  set(discover_args DISCOVERY_TIMEOUT 60)
  if(ARG_DISCOVERY_TIMEOUT)
    set(discover_args DISCOVERY_TIMEOUT ${ARG_DISCOVERY_TIMEOUT})
  endif()
  if(ARG_TEST_PREFIX)
    list(APPEND discover_args TEST_PREFIX ${ARG_TEST_PREFIX})
  endif()
  if(ARG_TIMEOUT)
    list(APPEND discover_args PROPERTIES TIMEOUT ${ARG_TIMEOUT})
  endif()
  gtest_discover_tests(${name} ${discover_args})
endfunction()

# tensorscope_warnings_for_directory(): tensorscope_target_warnings on every target the
# calling CMakeLists.txt has declared so far (bench/, examples/, fuzz/: one line each).
function(tensorscope_warnings_for_directory)
  get_property(targets DIRECTORY PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type STREQUAL "INTERFACE_LIBRARY")
      tensorscope_target_warnings(${target})
    endif()
  endforeach()
endfunction()
