# The ctest install_and_find_package (CMakeLists.txt): installs the build into WORK_DIR/prefix
# (cmake --install), checks what a user gets there (headers, the filkit command, the package's
# files), then configures, builds and runs the user's project tests/install/consumer against it:
# find_package(filkit) and filkit::filkit, whose results it checks against closed forms. WORK_DIR
# is a fixed folder of the build, made afresh, so that ccache (LAUNCHER) serves the consumer's
# compile on later runs; the consumer is built without a build type (no optimisation: the quickest
# compile, 10 s of CPU cold, under a second from ccache).
#   cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DCXX_COMPILER=... [-DLAUNCHER=...]
#         [-DWITH_TORCH=ON] -DVERSION=... -P install_test.cmake
foreach(variable BUILD_DIR SOURCE_DIR WORK_DIR CXX_COMPILER VERSION)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "install_test.cmake: -D${variable}=... is missing")
  endif()
endforeach()
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)

set(expected include/filkit/leakage/fil.hpp include/filkit/jobs/registry.hpp bin/filkit)
if(WITH_TORCH)
  list(APPEND expected lib/filkit/libfilkit_torch.so)  # where the installed filkit looks for it
endif()
foreach(file ${expected})
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "the installation lacks ${file}")
  endif()
endforeach()
file(GLOB_RECURSE configs ${prefix}/*/filkit-config.cmake)
if(NOT configs)
  message(FATAL_ERROR "the installation has no filkit-config.cmake")
endif()
execute_process(COMMAND ${prefix}/bin/filkit --version OUTPUT_VARIABLE printed OUTPUT_STRIP_TRAILING_WHITESPACE
                COMMAND_ERROR_IS_FATAL ANY)
if(NOT printed STREQUAL VERSION)
  message(FATAL_ERROR "the installed filkit --version printed '${printed}', not ${VERSION}")
endif()

set(launcher)
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/consumer
                        -DCMAKE_BUILD_TYPE= -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher}
                        -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK_DIR}/consumer/filkit_consumer COMMAND_ERROR_IS_FATAL ANY)
