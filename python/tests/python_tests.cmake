# The Python package's pytest suites, one ctest per file (so `ctest -j` runs them in
# parallel), against the build tree's package and daemon. Included by tests/CMakeLists.txt.
# Each file runs under Debian's Python and PyTorch 1.13 (python.<file>) and, where
# TENSORSCOPE_TORCH2_PYTHON names the interpreter of the PyTorch 2 environment
# (scripts/torch2_venv.sh), under it as well (python.torch2.<file>).
set(TENSORSCOPE_TORCH2_PYTHON "" CACHE FILEPATH
    "A Python with PyTorch 2 (scripts/torch2_venv.sh) that runs the Python suite a second time; empty: none")
set(python_test_runs "python=${Python_EXECUTABLE}")
if(TENSORSCOPE_TORCH2_PYTHON)
  list(APPEND python_test_runs "python.torch2=${TENSORSCOPE_TORCH2_PYTHON}")
endif()
file(GLOB tensorscope_python_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
foreach(run ${python_test_runs})
  string(REPLACE "=" ";" run ${run})
  list(GET run 0 prefix)
  list(GET run 1 interpreter)
  foreach(test ${tensorscope_python_tests})
    get_filename_component(name ${test} NAME_WE)
    add_test(NAME ${prefix}.${name}
             COMMAND ${interpreter} -m pytest -q -p no:cacheprovider ${test})
    set_tests_properties(${prefix}.${name} PROPERTIES TIMEOUT 600 ENVIRONMENT
      "TENSORSCOPE_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
  endforeach()
endforeach()
