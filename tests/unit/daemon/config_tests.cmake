# config_unit_tests: DaemonConfig loading (YAML, JSON) and session-name rules.
# include()d from daemon_tests.cmake; needs the tensorscope_daemon_core target (which
# holds the config code, daemon/src/config/).
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(config_unit_tests ${CMAKE_CURRENT_LIST_DIR}/daemon_config_test.cc)
target_link_libraries(config_unit_tests PRIVATE tensorscope_daemon_core GTest::gtest_main)
# The test loads configs/default.yaml from the source tree (TENSORSCOPE_SOURCE_DIR, set
# by tests/CMakeLists.txt).
gtest_discover_tests(config_unit_tests)
