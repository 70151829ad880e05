# What users link: Ember::core, Ember::nn, Ember::optim (when optim/ has sources) and
# Ember::ember (all of them). The same names work installed (find_package(Ember)) and in a
# build tree (add_subdirectory / FetchContent).
set(EMBER_LIBRARY_TARGETS)
foreach(part core nn optim)
  if(TARGET ember_${part})
    target_compile_features(ember_${part} PUBLIC cxx_std_20)
    # In the build tree: "core/tensor/tensor.h" (Ember's own sources) and <ember/core/tensor/tensor.h> (users).
    # Installed: only <prefix>/include, holding ember/.
    target_include_directories(
      ember_${part} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                           $<BUILD_INTERFACE:${EMBER_BUILD_INCLUDE_DIR}> $<INSTALL_INTERFACE:include>)
    set_target_properties(ember_${part} PROPERTIES EXPORT_NAME ${part})
    add_library(Ember::${part} ALIAS ember_${part})
    list(APPEND EMBER_LIBRARY_TARGETS ember_${part})
  endif()
endforeach()

add_library(ember_all INTERFACE)
target_link_libraries(ember_all INTERFACE ${EMBER_LIBRARY_TARGETS})
set_target_properties(ember_all PROPERTIES EXPORT_NAME ember)
add_library(Ember::ember ALIAS ember_all)
