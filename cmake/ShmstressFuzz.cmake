# shmstress_fuzz_target(<name> <seconds> <max_len> <seeds> <objects>...): a
# libFuzzer target <name>.cc of the calling folder, linked with the object
# libraries <objects> (each named: an object library's objects do not pass
# on through another), and its bounded ctest run (label "fuzz") over a copy of
# corpus/<seeds> with <name>.dict. The fuzzer writes new inputs into its first
# corpus dir, so each runs on a copy in the build tree, refreshed by a fixture
# before every run; the seeds in corpus/ stay as committed. Crash artifacts
# land in the build tree too.
set(SHMSTRESS_FUZZ_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)

function(shmstress_fuzz_target name seconds max_len seeds)
  add_executable(${name} ${name}.cc)
  target_link_libraries(${name} PRIVATE ${ARGN})
  target_link_options(${name} PRIVATE -fsanitize=fuzzer ${SHMSTRESS_FUZZ_FLAGS})
  set(corpus ${CMAKE_CURRENT_BINARY_DIR}/corpus-${name})
  add_test(NAME fuzz_${name}_corpus
           COMMAND ${CMAKE_COMMAND} -E copy_directory ${CMAKE_CURRENT_SOURCE_DIR}/corpus/${seeds}
                   ${corpus})
  set_tests_properties(fuzz_${name}_corpus PROPERTIES FIXTURES_SETUP fuzz_${name}_corpus
                                                        LABELS "fuzz")
  add_test(NAME fuzz_${name}
           COMMAND ${name} -max_total_time=${seconds} -rss_limit_mb=2048 -max_len=${max_len}
                   -timeout=10 -print_final_stats=1 -dict=${CMAKE_CURRENT_SOURCE_DIR}/${name}.dict
                   -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/${name}- ${corpus}
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(fuzz_${name} PROPERTIES
    LABELS "fuzz" FIXTURES_REQUIRED fuzz_${name}_corpus TIMEOUT 120
    ENVIRONMENT "UBSAN_OPTIONS=print_stacktrace=1;ASAN_OPTIONS=detect_leaks=1")
endfunction()
