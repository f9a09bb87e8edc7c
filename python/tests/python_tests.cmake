# The Python package's pytest suites, one ctest per file (so `ctest -j` runs them in
# parallel), against the build tree's package and daemon. Included by tests/CMakeLists.txt.
file(GLOB tensorscope_python_tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/test_*.py)
foreach(test ${tensorscope_python_tests})
  get_filename_component(name ${test} NAME_WE)
  add_test(NAME python.${name}
           COMMAND ${Python_EXECUTABLE} -m pytest -q -p no:cacheprovider ${test})
  set_tests_properties(python.${name} PROPERTIES TIMEOUT 600 ENVIRONMENT
    "TENSORSCOPE_BUILD_DIR=${PROJECT_BINARY_DIR};PYTHONPATH=${PROJECT_BINARY_DIR}/python;PYTHONDONTWRITEBYTECODE=1")
endforeach()
