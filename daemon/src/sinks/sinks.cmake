# Recording sinks of a worker (raw values and statistics of the tensors it receives).
# include()d from daemon/CMakeLists.txt; adds its sources to tensorscope_daemon_core.
