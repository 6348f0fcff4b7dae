# shmstress_discover_tests(<target> <label>...): gtest_discover_tests with
# every label kept. CMake 3.25's discovery flattens a list-valued LABELS
# property and keeps only the first label, so the labels are set again from a
# file ctest includes after discovery.
function(shmstress_discover_tests target)
  set(labels ${ARGN})
  gtest_discover_tests(${target} DISCOVERY_TIMEOUT 30)
  string(REPLACE ";" "\\;" escaped "${labels}")
  set(file ${CMAKE_CURRENT_BINARY_DIR}/${target}_labels.cmake)
  file(WRITE ${file}
       "foreach(t IN LISTS ${target}_TESTS)\n  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${escaped}\")\nendforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${file})
endfunction()
