# Run at install time (cmake --install): copies Ember's headers to
# <prefix>/<EMBER_HEADER_DESTINATION>/{core,nn,optim}/... and ember.h, rewriting the includes of
# Ember's own headers from "core/x.h" to "ember/core/x.h", so that nothing but ember/ sits at
# the top of the installed include directory (also "core/base/fma-inl.h": a name may hold '-').
set(destination "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${EMBER_HEADER_DESTINATION}")
file(GLOB_RECURSE headers RELATIVE ${EMBER_SOURCE_DIR} ${EMBER_SOURCE_DIR}/core/*.h
     ${EMBER_SOURCE_DIR}/nn/*.h ${EMBER_SOURCE_DIR}/optim/*.h)
# The umbrella header <ember/ember.h> is kept in scripts/cmake/ (the repository's top level holds
# only the core/, nn/, optim/, examples/ and tests/ folders).
list(APPEND headers scripts/cmake/ember.h)
foreach(header ${headers})
  file(READ ${EMBER_SOURCE_DIR}/${header} text)
  if(header STREQUAL "scripts/cmake/ember.h")
    set(header ember.h)
  endif()
  string(REGEX REPLACE "\"((core|nn|optim)/[A-Za-z0-9_/-]+\\.h)\"" "\"ember/\\1\"" text "${text}")
  set(target ${destination}/${header})
  message(STATUS "Installing: ${target}")
  file(WRITE ${target} "${text}")
endforeach()

# Forwarding headers for the paths of before the split into layer folders.
include(${EMBER_SOURCE_DIR}/scripts/cmake/EmberMovedHeaders.cmake)
ember_write_forwarding_headers(${destination} "ember/")
