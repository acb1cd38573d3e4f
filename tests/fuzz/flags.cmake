# flags.cmake - the compiler flags of a KOLO_FUZZ build (included by the
# top-level CMakeLists.txt before the library is defined, so that kolo's
# own objects are instrumented for libFuzzer and sanitized).  UBSan does not
# recover: a report ends the run, which libFuzzer then counts as a crash.
if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "KOLO_FUZZ=ON needs clang (cmake -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++); "
                      "this build's C compiler is ${CMAKE_C_COMPILER_ID}")
endif()
if(KOLO_SANITIZE)
  message(FATAL_ERROR "KOLO_FUZZ=ON brings its own sanitizers: leave KOLO_SANITIZE empty")
endif()
set(KOLO_FUZZ_SANITIZE "address,undefined")
add_compile_options(-fsanitize=fuzzer-no-link,${KOLO_FUZZ_SANITIZE} -fno-sanitize-recover=all
                    -fno-omit-frame-pointer)
add_link_options(-fsanitize=${KOLO_FUZZ_SANITIZE})
