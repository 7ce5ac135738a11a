# Helpers that keep every module's CMakeLists.txt to a few lines.

set(KVF_COMMON_WARNINGS -Wall -Wextra -Wshadow=local -Wno-missing-field-initializers)
# g++ 12 reports false -Wrestrict / -Wstringop-overflow inside libstdc++ string and vector code at
# -O3 (GCC PR105651, PR106199); they fire on plain `"--" + name`, so they are off.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND KVF_COMMON_WARNINGS -Wno-restrict -Wno-stringop-overflow)
  # Sanitizer instrumentation makes g++ 12 report false -Wmaybe-uninitialized inside libstdc++
  # (std::regex, std::function); the sanitizers themselves check initialization at run time.
  if(KVF_SANITIZE)
    list(APPEND KVF_COMMON_WARNINGS -Wno-maybe-uninitialized)
  endif()
endif()
if(KVF_WERROR)
  list(APPEND KVF_COMMON_WARNINGS -Werror)
endif()

function(kvforge_apply_common target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${KVF_COMMON_WARNINGS}>)
  if(KVF_SANITIZE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${KVF_SANITIZE} -fno-omit-frame-pointer
                                             -fno-sanitize-recover=all>)
    target_compile_definitions(${target} PRIVATE KVF_ENABLE_DCHECK=1)
    target_link_options(${target} PRIVATE -fsanitize=${KVF_SANITIZE})
  endif()
endfunction()

# kvforge_module(NAME SRCS a.cc b.cc DEPS kvforge_base ...)
function(kvforge_module name)
  cmake_parse_arguments(M "" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(kvforge_${name} STATIC ${M_SRCS})
  # Only the public API travels to dependents; a target that reaches into a module's internal
  # headers (tests, benchmarks, the CLI's tool commands, the Python edge) says so itself.
  target_include_directories(kvforge_${name} PUBLIC ${CMAKE_SOURCE_DIR}/include
                                             PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(kvforge_${name} PUBLIC ${M_DEPS} ${M_PUBLIC_DEPS})
  kvforge_apply_common(kvforge_${name})
  if(KVF_SANITIZE)
    target_link_options(kvforge_${name} INTERFACE -fsanitize=${KVF_SANITIZE})
  endif()
endfunction()

# kvforge_test(NAME SRCS ... DEPS ... [LABELS unit])
function(kvforge_test name)
  cmake_parse_arguments(T "" "" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${T_SRCS})
  target_link_libraries(${name} PRIVATE ${T_DEPS} kvforge_test_support GTest::gtest GTest::gmock Threads::Threads)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  kvforge_apply_common(${name})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  # The data folder is compiled in (tests/support/test_paths.cc); a KVF_SHARED_DIR environment
  # variable set when ctest runs overrides it without a rebuild.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
                       PROPERTIES LABELS "${T_LABELS}")
endfunction()
