# ctest fixture: installs an npm test client (default the `openai` client v6, Node 20) into
# PREFIX (the build tree), never into the source tree. Never fails: without npm or network the
# dependent test skips itself.
#   cmake -DPREFIX=<build>/npm [-DPACKAGE=puppeteer-core@24 -DNAME=puppeteer-core] -P npm_install.cmake
if(NOT PACKAGE)
  set(PACKAGE openai@6)
  set(NAME openai)
endif()
if(EXISTS "${PREFIX}/node_modules/${NAME}/package.json")
  message(STATUS "${NAME} npm package already installed in ${PREFIX}")
  return()
endif()
find_program(NPM npm)
if(NOT NPM)
  message(STATUS "npm not found: the ${NAME} test will be skipped")
  return()
endif()
file(MAKE_DIRECTORY "${PREFIX}")
execute_process(COMMAND "${NPM}" install --no-audit --no-fund --no-save --fetch-retries=1
                        --fetch-timeout=60000 --prefix "${PREFIX}" ${PACKAGE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
if(rc EQUAL 0)
  message(STATUS "installed ${PACKAGE} into ${PREFIX}")
else()
  message(STATUS "npm install ${PACKAGE} failed (${rc}); the ${NAME} test will be skipped\n${out}\n${err}")
endif()
