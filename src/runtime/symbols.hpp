// Entry points of a library opened at run time (dlopen): libcuda (runtime/driver.cpp) and NCCL
// (runtime/nccl.cpp), so that rime links against neither.
#pragma once

#include <dlfcn.h>

#include <string>

namespace rime::runtime {

// Entry point `name` of the handle `lib` as a function pointer of type F; false, with `error` naming `library`
// and the symbol, when it has none.
template <class F>
bool load_symbol(void* lib, const char* library, const char* name, F& out, std::string& error) {
  void* sym = dlsym(lib, name);
  if (!sym) {
    error = std::string(library) + " has no symbol " + name;
    return false;
  }
  out = reinterpret_cast<F>(sym);
  return true;
}

}  // namespace rime::runtime
