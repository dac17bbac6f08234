# Included into llama.cpp's own CMake project by scripts/install-llama-server.sh
# (-DCMAKE_PROJECT_INCLUDE): halves the build of llama-server on a 2-core CI machine
# (10:55 -> 4:55 here) without touching llama.cpp's sources or its kernels.
#
# - ggml (the matrix kernels: where the time of serving goes) keeps llama.cpp's -O3.
# - The model code, the common library, the HTTP server, multimodal support and cpp-httplib are
#   built at -O1: they are template-heavy C++ (nlohmann::json, httplib) whose -O3 code
#   generation was 80 % of the build, and they run once per token or per request, not per
#   multiply-add. benchmarks/llama_build_flags.py measured no loss in served tok/s (C=1 1.036x,
#   C=4 1.006x of the -O3 binary, within noise).
# - Unity builds for the targets whose files each re-parse and re-instantiate the same JSON
#   headers. Three files do not compile inside a unity unit and stay separate.

get_property(_llmperf_deferred GLOBAL PROPERTY LLMPERF_BUILD_TUNING)
if(NOT _llmperf_deferred)  # CMAKE_PROJECT_INCLUDE runs after every project(): ggml has its own
  set_property(GLOBAL PROPERTY LLMPERF_BUILD_TUNING ON)
  # Deferred to the end of the top-level CMakeLists, when every target exists.
  cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _llmperf_tune_llama_server_build)
endif()

function(_llmperf_tune_llama_server_build)
  foreach(target llama-common server-context llama-server-impl mtmd)
    set_property(TARGET ${target} PROPERTY UNITY_BUILD ON)
    set_property(TARGET ${target} PROPERTY UNITY_BUILD_BATCH_SIZE 16)
  endforeach()
  # GCC takes the last -O: this follows CMAKE_CXX_FLAGS_RELEASE's -O3.
  foreach(target llama llama-common server-context llama-server-impl mtmd cpp-httplib llama-server)
    set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O1)
  endforeach()
  # Explicit specializations after a use elsewhere in the unit; mtmd-helper refuses internal headers.
  set_source_files_properties(common/json.cpp common/jinja/value.cpp TARGET_DIRECTORY llama-common
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  set_source_files_properties(tools/mtmd/mtmd-helper.cpp tools/mtmd/mtmd-helper-gen.cpp TARGET_DIRECTORY mtmd
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
