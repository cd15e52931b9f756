# rime cache on real entries (one `cache warm` of an example): every documented form of --max-bytes through the
# CLI itself (512M, 1G, 2147483648 keep every entry and print the size in bytes), then an entry's name taken by a
# regular file: the next warm says it cannot publish there and points at `cache verify`, which names the file
# with the command that removes it (exit 6); once removed, verify is clean again.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(ENV{RIME_CACHE_DIR} ${WORK}/cache)
include(${CMAKE_CURRENT_LIST_DIR}/cli_expect.cmake)

expect(0 "compiled" cache warm ${GRAPH})
expect(0 "^\\[" cache ls --json)
string(JSON n LENGTH "${last_output}")
if(n LESS 1)
  message(FATAL_ERROR "cache warm left no entry:\n${last_output}")
endif()
string(JSON victim GET "${last_output}" 0 name)

expect(0 "pruned to at most 536870912 bytes: 0 entries evicted" cache prune --max-bytes 512M)
expect(0 "pruned to at most 1073741824 bytes: 0 entries evicted" cache prune --max-bytes 1G)
expect(0 "pruned to at most 2147483648 bytes: 0 entries evicted" cache prune --max-bytes 2147483648)
expect(0 "${n} entries, 0 foreign names" cache ls)
expect(0 "pruned to at most 1024 bytes: ${n} entries evicted" cache prune --max-bytes 1K)
expect(0 "0 entries, 0 foreign names" cache ls)

# A regular file where an entry's directory would go.
expect(0 "compiled" cache warm ${GRAPH})
file(REMOVE_RECURSE ${WORK}/cache/${victim})
file(WRITE ${WORK}/cache/${victim} "not rime's")
expect(0 "cache name .*${victim} is taken by a regular file.*`rime cache verify` names the command" cache warm ${GRAPH})
set(reported "foreign \"${victim}\" \\(a regular file, not an entry directory\\) holds an entry's name")
expect(6 "${reported}.*rm -- '${WORK}/cache/${victim}'.*1 holding an entry's name" cache verify)
if(NOT EXISTS ${WORK}/cache/${victim})
  message(FATAL_ERROR "cache verify removed a foreign file")
endif()
file(REMOVE ${WORK}/cache/${victim})
expect(0 "0 bad; 0 foreign names" cache verify)
