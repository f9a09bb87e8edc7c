# daemon_unit_tests: safe file names, index.json writing, stream routing and videos.
# include()d from tests/CMakeLists.txt; needs the tensorscope_daemon_core target.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(daemon_unit_tests
  ${CMAKE_CURRENT_LIST_DIR}/index_writer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/stream_router_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/mode_selector_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/record_sinks_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_payload_reader_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/run_info_writer_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/inherited_descriptors_test.cc)
target_include_directories(daemon_unit_tests PRIVATE ${PROJECT_SOURCE_DIR}/daemon/src)
target_link_libraries(daemon_unit_tests PRIVATE
  tensorscope_daemon_core tensorscope_test_support nlohmann_json::nlohmann_json GTest::gtest_main)
gtest_discover_tests(daemon_unit_tests)
include(${CMAKE_CURRENT_LIST_DIR}/config_tests.cmake)
