# daemon_compare_tests: `tensorscope compare` (tensor comparison, dump directories, and
# the real command-line tool run as a child process).
# include()d from daemon_tests.cmake; needs the tensorscope_daemon_core and
# tensorscope_cli targets.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(daemon_compare_tests
  ${CMAKE_CURRENT_LIST_DIR}/tensor_compare_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dump_compare_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_compare_test.cc)
target_include_directories(daemon_compare_tests PRIVATE ${PROJECT_SOURCE_DIR}/daemon/src)
target_link_libraries(daemon_compare_tests PRIVATE
  tensorscope_daemon_core tensorscope_test_support nlohmann_json::nlohmann_json GTest::gtest_main)
target_compile_definitions(daemon_compare_tests PRIVATE
  TENSORSCOPE_CLI_PATH="$<TARGET_FILE:tensorscope_cli>")
add_dependencies(daemon_compare_tests tensorscope_cli)
gtest_discover_tests(daemon_compare_tests)
