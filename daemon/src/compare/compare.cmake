# `tensorscope compare`: streaming comparison of .npy files, dump directories, HDF5
# recordings and PyTorch-saved files (.pt/.pth, read without libtorch: a zip reader and
# a safe unpickler). include()d from daemon/CMakeLists.txt; adds its sources to
# tensorscope_daemon_core (which links tensorscope::recording: .npy and HDF5 formats).
target_sources(tensorscope_daemon_core PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/tensor_compare.cc
  ${CMAKE_CURRENT_LIST_DIR}/dump_compare.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_recording.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_reader_process.cc
  ${CMAKE_CURRENT_LIST_DIR}/hdf5_source.cc
  ${CMAKE_CURRENT_LIST_DIR}/zip_archive.cc
  ${CMAKE_CURRENT_LIST_DIR}/pickle_machine.cc
  ${CMAKE_CURRENT_LIST_DIR}/torch_file_source.cc)
