# Recording sinks of a worker (raw values and statistics of the tensors it receives).
# include()d from daemon/CMakeLists.txt; adds its sources to tensorscope_daemon_core.
target_sources(tensorscope_daemon_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/append_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/npy_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/stats_table.cc
  ${CMAKE_CURRENT_LIST_DIR}/tree_log.cc)

# HDF5 recording sink (hdf5_sink.cc): the HDF5 C library (Debian: libhdf5-dev, serial).
find_package(HDF5 REQUIRED COMPONENTS C)
target_sources(tensorscope_daemon_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_sink.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_support.cc)
target_include_directories(tensorscope_daemon_core SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS})
target_compile_definitions(tensorscope_daemon_core PRIVATE ${HDF5_C_DEFINITIONS})
target_link_libraries(tensorscope_daemon_core PRIVATE ${HDF5_C_LIBRARIES})
