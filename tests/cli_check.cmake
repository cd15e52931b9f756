# Runs COMMAND (a |-separated list), then checks its exit code against EXPECT_EXIT and that stdout+stderr match
# EXPECT_REGEX. ctest alone can only say "non-zero"; the CLI's exit codes are part of its contract.
string(REPLACE "|" ";" argv "${COMMAND}")
execute_process(COMMAND ${argv} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_EXIT}\n--- output ---\n${all}")
endif()
if(NOT "${all}" MATCHES "${EXPECT_REGEX}")
  message(FATAL_ERROR "output does not match /${EXPECT_REGEX}/\n--- output ---\n${all}")
endif()
message(STATUS "ok: exit ${rc}, output matches /${EXPECT_REGEX}/")
