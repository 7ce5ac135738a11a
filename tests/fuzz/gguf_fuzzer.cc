// libFuzzer target for the GGUF reader: any byte string must parse or give a clean error.
// When it parses, walk everything it returned so ASan checks every view into the buffer.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = kvforge::gguf::GgufFile::FromMemory(data, size, "fuzz.gguf");
  if (!f.ok()) return 0;
  size_t sink = 0;
  for (const auto& key : (*f)->keys()) {
    const auto* v = (*f)->Find(key);
    sink += v->str.size();
    for (auto s : v->strings) sink += s.empty() ? 0 : static_cast<uint8_t>(s.back());
    if (v->elems != nullptr && v->count > 0)
      sink += static_cast<size_t>(kvforge::gguf::GgufFile::ArrayInt(*v, v->count - 1));
  }
  for (const auto& t : (*f)->tensors())
    if (t.nbytes > 0) sink += t.data[0] + t.data[t.nbytes - 1];
  volatile size_t keep = sink;
  (void)keep;
  return 0;
}
