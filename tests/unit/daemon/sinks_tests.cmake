# daemon_sink_tests: the worker's recording sinks (.npy files, the statistics table).
# include()d from daemon_tests.cmake; needs the tensorscope_daemon_core target. The
# numpy interoperability tests run /usr/bin/python3 and skip when numpy is absent.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(daemon_sink_tests
  ${CMAKE_CURRENT_LIST_DIR}/npy_file_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/stats_table_test.cc)
target_include_directories(daemon_sink_tests PRIVATE ${PROJECT_SOURCE_DIR}/daemon/src)
target_link_libraries(daemon_sink_tests PRIVATE
  tensorscope_daemon_core tensorscope_test_support GTest::gtest_main)
gtest_discover_tests(daemon_sink_tests)
