# config_unit_tests: DaemonConfig loading (YAML, JSON) and session-name rules.
# include()d from tests/CMakeLists.txt; needs the tensorscope::shared target.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(config_unit_tests ${CMAKE_CURRENT_LIST_DIR}/daemon_config_test.cc)
target_link_libraries(config_unit_tests PRIVATE tensorscope::shared GTest::gtest_main)
# The test loads configs/default.yaml from the source tree. tests/CMakeLists.txt is
# expected to define TENSORSCOPE_SOURCE_DIR; define it here too when it has not.
get_directory_property(_ts_dir_defs COMPILE_DEFINITIONS)
if(NOT _ts_dir_defs MATCHES "TENSORSCOPE_SOURCE_DIR")
  target_compile_definitions(config_unit_tests PRIVATE
    TENSORSCOPE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
gtest_discover_tests(config_unit_tests)
