# Recording sinks of a worker (raw values and statistics of the tensors it receives).
# include()d from daemon/CMakeLists.txt; adds its sources to tensorscope_daemon_core.
target_sources(tensorscope_daemon_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/npy_file.cc
  ${CMAKE_CURRENT_LIST_DIR}/stats_table.cc)
