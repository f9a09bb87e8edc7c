# daemon_sink_tests: the worker's recording sinks (.npy files, the statistics table, HDF5,
# the module tree log).
# include()d from daemon_tests.cmake; needs the tensorscope_daemon_core target. The
# numpy and h5py interoperability tests run /usr/bin/python3 and skip when those are absent.
# The HDF5 tests read the files back with the HDF5 C API.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(daemon_sink_tests
  ${CMAKE_CURRENT_LIST_DIR}/npy_file_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/stats_table_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/tree_log_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_sink_test.cc)
target_include_directories(daemon_sink_tests PRIVATE ${PROJECT_SOURCE_DIR}/daemon/src)
target_link_libraries(daemon_sink_tests PRIVATE
  tensorscope_daemon_core tensorscope_test_support GTest::gtest_main)
find_package(HDF5 REQUIRED COMPONENTS C)
target_include_directories(daemon_sink_tests SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS})
target_compile_definitions(daemon_sink_tests PRIVATE ${HDF5_C_DEFINITIONS})
target_link_libraries(daemon_sink_tests PRIVATE ${HDF5_C_LIBRARIES})
gtest_discover_tests(daemon_sink_tests)
