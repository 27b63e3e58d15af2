# attnc_add_library(): compile a .attn kernel ahead of time into a static library + headers.
#
#   attnc_add_library(<name> SOURCE <file.attn>
#                     [TARGETS host|<halide-target>]  # one target per library (default: host)
#                     [KERNEL <kernel>]               # when the file holds several kernels
#                     [FUNCTION_NAME <c-name>]        # C symbol and descriptor name (default: kernel name)
#                     [SCHEDULE auto|none|<rule>]     # default: auto
#                     [DEFINES NAME=VALUE ...]
#                     [SIZES NAME=VALUE ...]          # typical sizes for the cost-model passes
#                     [SAMPLE_ORDER auto|sample-first|project-first])
#
# Produces an INTERFACE target <name> that links <name>.a (kernel + Halide runtime) and the
# attnc runtime, and puts <name>.h (Halide's C API) and <name>.attnc.h (the runtime descriptor,
# `attnc_kernels::<function>()`) on the include path.
find_package(Threads REQUIRED)

function(attnc_add_library name)
  cmake_parse_arguments(ARG "" "SOURCE;KERNEL;FUNCTION_NAME;SCHEDULE;SAMPLE_ORDER" "TARGETS;DEFINES;SIZES" ${ARGN})
  if(NOT ARG_SOURCE)
    message(FATAL_ERROR "attnc_add_library(${name}): SOURCE is required")
  endif()
  if(NOT ARG_TARGETS)
    set(ARG_TARGETS host)
  endif()
  list(LENGTH ARG_TARGETS ntargets)
  if(NOT ntargets EQUAL 1)
    message(FATAL_ERROR "attnc_add_library(${name}): give exactly one target per library (got ${ARG_TARGETS})")
  endif()
  if(NOT ARG_SCHEDULE)
    set(ARG_SCHEDULE auto)
  endif()
  get_filename_component(src "${ARG_SOURCE}" ABSOLUTE)
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/attnc/${name}")
  set(prefix "${dir}/${name}")
  set(flags --target=${ARG_TARGETS} --schedule=${ARG_SCHEDULE})
  if(ARG_KERNEL)
    list(APPEND flags --kernel=${ARG_KERNEL})
  endif()
  if(ARG_FUNCTION_NAME)
    list(APPEND flags --function-name=${ARG_FUNCTION_NAME})
  endif()
  foreach(d IN LISTS ARG_DEFINES)
    list(APPEND flags -D ${d})
  endforeach()
  if(ARG_SIZES)
    list(JOIN ARG_SIZES "," sizes)
    list(APPEND flags --sizes=${sizes})
  endif()
  if(ARG_SAMPLE_ORDER)
    list(APPEND flags --sample-order=${ARG_SAMPLE_ORDER})
  endif()
  add_custom_command(
    OUTPUT "${prefix}.a" "${prefix}.h" "${prefix}.attnc.h"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND $<TARGET_FILE:attnc> "${src}" --emit=lib -o "${prefix}" --depfile=${prefix}.d ${flags}
    DEPENDS attnc "${src}"
    DEPFILE "${prefix}.d"
    COMMENT "attnc: compiling ${ARG_SOURCE} for ${ARG_TARGETS}"
    VERBATIM)
  add_custom_target(${name}_attnc DEPENDS "${prefix}.a" "${prefix}.h" "${prefix}.attnc.h")
  add_library(${name} INTERFACE)
  add_dependencies(${name} ${name}_attnc)
  target_include_directories(${name} INTERFACE "${dir}")
  target_link_libraries(${name} INTERFACE "${prefix}.a" attnc_runtime Threads::Threads ${CMAKE_DL_LIBS})
endfunction()
