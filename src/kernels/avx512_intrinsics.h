// avx512_intrinsics.h — <immintrin.h> for the AVX-512 translation units (kernels_avx512.cc,
// gemm_avx512.cc); include ONLY from files compiled with -mavx512f.
//
// gcc 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source of their
// masked builtins, which -Wuninitialized reports inside the header (GCC PR 105593). The
// diagnostic's location is the header, so ignoring it there leaves the including file checked.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
