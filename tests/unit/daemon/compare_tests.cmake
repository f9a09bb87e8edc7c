# daemon_compare_tests: `tensorscope compare` (tensor comparison, dump directories, HDF5
# recordings, PyTorch files read without libtorch: the zip reader, the unpickler, the
# .pt source, and the real command-line tool run as a child process).
# include()d from daemon_tests.cmake; needs the tensorscope_daemon_core and
# tensorscope_cli targets.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(daemon_compare_tests
  ${CMAKE_CURRENT_LIST_DIR}/tensor_compare_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/dump_compare_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_compare_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/zip_archive_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/pickle_machine_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_file_source_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_compare_test.cc)
target_include_directories(daemon_compare_tests PRIVATE ${PROJECT_SOURCE_DIR}/daemon/src)
target_link_libraries(daemon_compare_tests PRIVATE
  tensorscope_daemon_core tensorscope_test_support nlohmann_json::nlohmann_json GTest::gtest_main)
target_compile_definitions(daemon_compare_tests PRIVATE
  TENSORSCOPE_CLI_PATH="$<TARGET_FILE:tensorscope_cli>")
add_dependencies(daemon_compare_tests tensorscope_cli)

# make_torch_files: writes .pt files with libtorch's torch::save / torch::pickle_save for
# the round-trip tests. Only this small program links libtorch (the reader and the test
# executable never do); without Torch the round-trip tests skip.
if(TARGET torch)
  add_executable(make_torch_files ${PROJECT_SOURCE_DIR}/tests/support/make_torch_files.cc)
  target_include_directories(make_torch_files PRIVATE ${PROJECT_SOURCE_DIR}/tests/support)
  target_link_libraries(make_torch_files PRIVATE ${TORCH_LIBRARIES})
  target_compile_definitions(daemon_compare_tests PRIVATE
    TENSORSCOPE_MAKE_TORCH_FILES="$<TARGET_FILE:make_torch_files>")
  add_dependencies(daemon_compare_tests make_torch_files)
endif()
gtest_discover_tests(daemon_compare_tests)
