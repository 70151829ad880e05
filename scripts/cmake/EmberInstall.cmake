# cmake --install <build> --prefix P installs:
#   P/include/ember/...                      the headers (core/, nn/, optim/, ember.h)
#   P/lib/libember_core.a, ...               the libraries
#   P/lib/cmake/Ember/EmberConfig.cmake      the package: find_package(Ember CONFIG REQUIRED)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ${EMBER_LIBRARY_TARGETS} ember_all EXPORT EmberTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT EmberTargets NAMESPACE Ember:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)

# Headers, with their includes moved under ember/ ("core/tensor/tensor.h" -> "ember/core/tensor/tensor.h").
install(CODE "set(EMBER_SOURCE_DIR \"${PROJECT_SOURCE_DIR}\")
set(EMBER_HEADER_DESTINATION \"${CMAKE_INSTALL_INCLUDEDIR}/ember\")")
install(SCRIPT ${PROJECT_SOURCE_DIR}/scripts/cmake/EmberInstallHeaders.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/scripts/cmake/EmberConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/EmberConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/EmberConfig.cmake ${PROJECT_BINARY_DIR}/EmberConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)
