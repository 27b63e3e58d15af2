# attnc_add_library(): compile a .attn kernel ahead of time into a static library + headers.
#
#   attnc_add_library(<name> SOURCE <file.attn>
#                     [TARGETS host|<halide-target>]  # one target per library (default: host)
#                     [KERNEL <kernel>]               # when the file holds several kernels
#                     [FUNCTION_NAME <c-name>]        # C symbol and descriptor name (default: kernel name)
#                     [SCHEDULE auto|none|<rule>]     # default: auto
#                     [DEFINES NAME=VALUE ...]
#                     [SIZES NAME=VALUE ...]          # typical sizes for the cost-model passes and
#                                                     # the tuning database's size bucket
#                     [SAMPLE_ORDER auto|sample-first|project-first]
#                     [ONLINE_SOFTMAX auto|on|off]    # attn-online-softmax (auto: on for CPU targets)
#                     [TUNING_DB <path>|none]         # attn-tune's database (default: attnc-tuning.json
#                                                     # beside the source, when present; docs/tuning.md)
#                     [TORCH])                        # also a PyTorch operator module (below)
#
# Produces an INTERFACE target <name> that links <name>.a (the kernel), the Halide runtime for its
# target (one library per target, attnc_halide_runtime_<target>, shared by every kernel built for
# that target) and the attnc runtime, and puts <name>.h (Halide's C API) and <name>.attnc.h (the runtime descriptor,
# `attnc_kernels::<function>()`) on the include path.
#
# With TORCH (and PyTorch found by the build, ATTNC_TORCH), also a shared module <name>_torch,
# <build>/attnc/<name>/<name>_torch.so, that registers the kernel as torch.ops.attnc.<function>
# when loaded (`attnc.load(path)` or `torch.ops.load_library(path)`; runtime/torch/module.cpp).
find_package(Threads REQUIRED)

# The compiler and the runtime library: this project's own targets in its build tree, the
# imported attnc::attnc and attnc::runtime when used through find_package(attnc).
# The PyTorch operator library: attnc::torch where the installed attnc was built with PyTorch
# (attncConfig.cmake also sets ATTNC_TORCH_MODULE_SOURCE and ATTNC_TORCH_LIBDIR), attnc_torch here.
if(TARGET attnc::attnc)
  set(_ATTNC_COMPILER attnc::attnc)
  set(_ATTNC_RUNTIME attnc::runtime)
  set(_ATTNC_TORCH attnc::torch)
else()
  set(_ATTNC_COMPILER attnc)
  set(_ATTNC_RUNTIME attnc_runtime)
  set(_ATTNC_TORCH attnc_torch)
  set(ATTNC_TORCH_MODULE_SOURCE "${CMAKE_CURRENT_LIST_DIR}/../runtime/torch/module.cpp")
  # ATTNC_PREBUILT_KERNELS: another build directory of this same source tree, already built, whose
  # kernels (and Halide runtimes) this build copies instead of compiling. `make test-asan` gives it
  # the release build: the code Halide generates is never instrumented, so the kernels are the same
  # bits, and compiling about 100 of them again (10-90 s each on 2 cores, nearly all of it in
  # libHalide and LLVM) was most of the sanitized build; lit still runs the instrumented attnc.
  set(ATTNC_PREBUILT_KERNELS "" CACHE PATH
      "Build directory of this source tree whose AOT kernels are copied (empty: compile them)")
endif()

# With ATTNC_PREBUILT_KERNELS, adds the command that makes <dir>/<file>... by copying them from
# the same place there, and sets <copied_var> TRUE; otherwise sets it FALSE (the caller compiles).
function(_attnc_prebuilt_copy dir files what copied_var)
  set(${copied_var} FALSE PARENT_SCOPE)
  if(NOT ATTNC_PREBUILT_KERNELS OR TARGET attnc::attnc)
    return()
  endif()
  file(RELATIVE_PATH rel "${CMAKE_BINARY_DIR}" "${dir}")
  set(from "")
  set(to "")
  foreach(f IN LISTS files)
    list(APPEND from "${ATTNC_PREBUILT_KERNELS}/${rel}/${f}")
    list(APPEND to "${dir}/${f}")
  endforeach()
  add_custom_command(
    OUTPUT ${to}
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND ${CMAKE_COMMAND} -E copy ${from} "${dir}"
    DEPENDS ${from}
    COMMENT "attnc: ${what} from ${ATTNC_PREBUILT_KERNELS}"
    VERBATIM)
  set(${copied_var} TRUE PARENT_SCOPE)
endfunction()

# The Halide runtime for one target (attnc --emit=runtime), built once per build tree: kernels are
# compiled without it (--no-runtime), so a program linking many kernels has one copy of its state
# (thread pool, CUDA context, error handler) per target. Sets <out_var> to the INTERFACE target.
function(_attnc_halide_runtime target out_var)
  string(MAKE_C_IDENTIFIER "${target}" id)
  set(rt "attnc_halide_runtime_${id}")
  if(NOT TARGET ${rt})
    set(dir "${CMAKE_BINARY_DIR}/attnc/halide_runtime_${id}")
    _attnc_prebuilt_copy("${dir}" "halide_runtime.a" "Halide runtime for ${target}" copied)
    if(NOT copied)
      add_custom_command(
        OUTPUT "${dir}/halide_runtime.a"
        COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
        COMMAND $<TARGET_FILE:${_ATTNC_COMPILER}> --emit=runtime --target=${target} -o "${dir}/halide_runtime"
        DEPENDS ${_ATTNC_COMPILER}
        COMMENT "attnc: Halide runtime for ${target}"
        VERBATIM)
    endif()
    add_custom_target(${rt}_gen DEPENDS "${dir}/halide_runtime.a")
    add_library(${rt} INTERFACE)
    add_dependencies(${rt} ${rt}_gen)
    target_link_libraries(${rt} INTERFACE "${dir}/halide_runtime.a" Threads::Threads ${CMAKE_DL_LIBS})
  endif()
  set(${out_var} ${rt} PARENT_SCOPE)
endfunction()

function(attnc_add_library name)
  # Kept so that a build of the same kernel for another target can be derived (attnc_add_twin).
  set_property(GLOBAL PROPERTY _ATTNC_LIBRARY_ARGS_${name} "${ARGN}")
  set_property(GLOBAL APPEND PROPERTY _ATTNC_ALL_LIBRARIES ${name})
  cmake_parse_arguments(ARG "TORCH" "SOURCE;KERNEL;FUNCTION_NAME;SCHEDULE;SAMPLE_ORDER;ONLINE_SOFTMAX;TUNING_DB" "TARGETS;DEFINES;SIZES" ${ARGN})
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
  # DEFINED, not if(ARG_...): `off` is a false constant to if(), and was silently dropped.
  if(DEFINED ARG_ONLINE_SOFTMAX)
    if(NOT ARG_ONLINE_SOFTMAX MATCHES "^(auto|on|off)$")
      message(FATAL_ERROR "attnc_add_library(${name}): ONLINE_SOFTMAX must be auto, on or off (got '${ARG_ONLINE_SOFTMAX}')")
    endif()
    list(APPEND flags --online-softmax=${ARG_ONLINE_SOFTMAX})
  endif()
  # The tuning database (attn-tune): attnc-tuning.json beside the source unless named; `none` ignores it.
  if(DEFINED ARG_TUNING_DB)
    if(ARG_TUNING_DB STREQUAL "none")
      list(APPEND flags --tuning-db=none)
    else()
      get_filename_component(db "${ARG_TUNING_DB}" ABSOLUTE)
      list(APPEND flags --tuning-db=${db})
    endif()
  endif()
  _attnc_prebuilt_copy("${dir}" "${name}.a;${name}.h;${name}.attnc.h" "${name}" copied)
  if(NOT copied)
    add_custom_command(
      OUTPUT "${prefix}.a" "${prefix}.h" "${prefix}.attnc.h"
      COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
      COMMAND $<TARGET_FILE:${_ATTNC_COMPILER}> "${src}" --emit=lib -o "${prefix}" --depfile=${prefix}.d --no-runtime ${flags}
      DEPENDS ${_ATTNC_COMPILER} "${src}"
      DEPFILE "${prefix}.d"
      COMMENT "attnc: compiling ${ARG_SOURCE} for ${ARG_TARGETS}"
      VERBATIM)
  endif()
  add_custom_target(${name}_attnc DEPENDS "${prefix}.a" "${prefix}.h" "${prefix}.attnc.h")
  add_library(${name} INTERFACE)
  add_dependencies(${name} ${name}_attnc)
  target_include_directories(${name} INTERFACE "${dir}")
  _attnc_halide_runtime(${ARG_TARGETS} halide_rt)
  # attnc_runtime first: its halide_error replaces the Halide runtime's (weak) one.
  target_link_libraries(${name} INTERFACE "${prefix}.a" ${_ATTNC_RUNTIME} ${halide_rt} Threads::Threads ${CMAKE_DL_LIBS})
  set_property(TARGET ${name} PROPERTY ATTNC_OUTPUT_DIR "${dir}")
  if(ARG_TORCH)
    attnc_add_torch_module(${name})
  endif()
endfunction()

# attnc_add_torch_module(<library>): the PyTorch operator module of a library made by
# attnc_add_library (what its TORCH option adds): <library>_torch, a shared module
# <build>/attnc/<library>/<library>_torch.so registering the kernel as torch.ops.attnc.<function>.
function(attnc_add_torch_module library)
  if(NOT TARGET ${_ATTNC_TORCH})
    message(FATAL_ERROR "attnc_add_torch_module(${library}): attnc was built without PyTorch (ATTNC_TORCH)")
  endif()
  get_property(dir TARGET ${library} PROPERTY ATTNC_OUTPUT_DIR)
  if(NOT dir)
    message(FATAL_ERROR "attnc_add_torch_module(${library}): '${library}' was not made by attnc_add_library")
  endif()
  add_library(${library}_torch MODULE "${ATTNC_TORCH_MODULE_SOURCE}")
  target_compile_definitions(${library}_torch PRIVATE "ATTNC_KERNEL_HEADER=\"${library}.attnc.h\"")
  target_link_libraries(${library}_torch PRIVATE ${library} ${_ATTNC_TORCH})
  # The module keeps its copies of attnc's runtime and Halide's to itself, and finds PyTorch's
  # libraries where the importing process loaded them.
  target_link_options(${library}_torch PRIVATE "LINKER:--exclude-libs,ALL")
  # Hidden visibility too: the descriptor header's inline registrar and function statics would
  # otherwise be exported as unique symbols, and a second module of the same kernel, loaded
  # RTLD_GLOBAL by torch.ops.load_library, would bind to the first one's and register nothing.
  set_target_properties(${library}_torch PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY "${dir}"
                        BUILD_RPATH "${ATTNC_TORCH_LIBDIR}" CXX_VISIBILITY_PRESET hidden
                        VISIBILITY_INLINES_HIDDEN ON)
endfunction()

# attnc_add_twin(<name> <library> TARGET <halide-target> [SUFFIX <s>]): the kernel of
# attnc_add_library(<library> ...) built again, with the same source, kernel, -D values and pass
# options, for another target (the schedule is that target's `auto`); the library is
# <library><s> and its C function <function><s> (default suffix: _twin).
function(attnc_add_twin name library)
  cmake_parse_arguments(TW "" "TARGET;SUFFIX" "" ${ARGN})
  if(NOT TW_SUFFIX)
    set(TW_SUFFIX _twin)
  endif()
  get_property(args GLOBAL PROPERTY _ATTNC_LIBRARY_ARGS_${library})
  if(NOT args)
    message(FATAL_ERROR "attnc_add_twin(${name}): '${library}' was not made by attnc_add_library")
  endif()
  cmake_parse_arguments(ARG "" "SOURCE;KERNEL;FUNCTION_NAME;SCHEDULE;SAMPLE_ORDER;ONLINE_SOFTMAX;TUNING_DB" "TARGETS;DEFINES;SIZES" ${args})
  if(NOT ARG_FUNCTION_NAME)
    message(FATAL_ERROR "attnc_add_twin(${name}): '${library}' needs an explicit FUNCTION_NAME")
  endif()
  set(opts SOURCE ${ARG_SOURCE} FUNCTION_NAME ${ARG_FUNCTION_NAME}${TW_SUFFIX} TARGETS ${TW_TARGET})
  if(ARG_KERNEL)
    list(APPEND opts KERNEL ${ARG_KERNEL})
  endif()
  if(ARG_DEFINES)
    list(APPEND opts DEFINES ${ARG_DEFINES})
  endif()
  if(ARG_SIZES)
    list(APPEND opts SIZES ${ARG_SIZES})
  endif()
  if(ARG_SAMPLE_ORDER)
    list(APPEND opts SAMPLE_ORDER ${ARG_SAMPLE_ORDER})
  endif()
  # (ONLINE_SOFTMAX is not carried over: each target takes its own default.)
  attnc_add_library(${name} ${opts})
endfunction()
