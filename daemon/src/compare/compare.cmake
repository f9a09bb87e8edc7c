# `tensorscope compare`: streaming comparison of .npy files and dump directories.
# include()d from daemon/CMakeLists.txt; adds its sources to tensorscope_daemon_core.
target_sources(tensorscope_daemon_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/tensor_compare.cc
  ${CMAKE_CURRENT_LIST_DIR}/dump_compare.cc)
