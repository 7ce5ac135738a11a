// limits.h — resource limits that keep a hostile chat template from hanging or exhausting memory.
//
// Every limit produces a StatusCode::kResourceExhausted error whose message names the limit.
// The defaults are far above what real chat templates need (a typical render uses a few thousand
// steps and no macro recursion) while bounding the worst case to well under a second of CPU and a
// few hundred MiB of memory.
// Thread-safety: plain value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvforge::chat {

struct Limits {
  size_t max_template_bytes = 1 << 20;       // template source size accepted by Parse
  int max_nesting_depth = 128;               // nesting of blocks and of expressions in the source
  size_t max_output_bytes = 8u << 20;        // rendered output; also caps any single string value
  uint64_t max_loop_iterations = 1'000'000;  // for-loop iterations per render, all loops together
  int max_call_depth = 64;                   // nested macro/caller invocations
  size_t max_collection_size = 1'000'000;    // elements in one list/dict built by the template
  // Work budget per render: one step per statement, expression, loop iteration, element a filter
  // touches, and per 16 bytes of string built. Bounds CPU time and total allocation.
  uint64_t max_steps = 10'000'000;
};

}  // namespace kvforge::chat
