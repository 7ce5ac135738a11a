# ctest fixture: installs the `openai` npm client (v6, Node 20) into PREFIX (the build tree), never
# into the source tree. Never fails: without npm or network the dependent test skips itself.
#   cmake -DPREFIX=<build>/npm -P npm_install.cmake
if(EXISTS "${PREFIX}/node_modules/openai/package.json")
  message(STATUS "openai npm client already installed in ${PREFIX}")
  return()
endif()
find_program(NPM npm)
if(NOT NPM)
  message(STATUS "npm not found: the openai client test will be skipped")
  return()
endif()
file(MAKE_DIRECTORY "${PREFIX}")
execute_process(COMMAND "${NPM}" install --no-audit --no-fund --no-save --fetch-retries=1
                        --fetch-timeout=60000 --prefix "${PREFIX}" openai@6
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
if(rc EQUAL 0)
  message(STATUS "installed openai@6 into ${PREFIX}")
else()
  message(STATUS "npm install openai@6 failed (${rc}); the openai client test will be skipped\n${out}\n${err}")
endif()
