# expect(CODE REGEX ARGS...): runs ${RIME} ARGS, fails unless it exits CODE with output matching REGEX; the output is
# left in last_output for the caller. Included by the cache tool's CLI test scripts.
function(expect code regex)
  execute_process(COMMAND ${RIME} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT "${rc}" STREQUAL "${code}" OR NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "rime ${ARGN}: exit ${rc} (expected ${code})\n${out}${err}\n(expected /${regex}/)")
  endif()
  set(last_output "${out}${err}" PARENT_SCOPE)
endfunction()
