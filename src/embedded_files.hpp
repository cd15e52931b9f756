// Internal: files embedded into the library at build time (cmake/embed_files.cmake), so that the library needs
// no files at run time and the JIT never sees an absolute path.
#pragma once

namespace rime {

struct EmbeddedFile {
  const char* path;  // relative to its root (rows/, engines/)
  const char* text;
};

// rows/*.json
extern const EmbeddedFile kEmbeddedRows[];
// engines/**/*.cuh and *.h: the kernel sources NVRTC compiles
extern const EmbeddedFile kEngineSources[];

}  // namespace rime
