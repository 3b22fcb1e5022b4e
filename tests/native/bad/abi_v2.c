/* A loop built for another ABI version: the harness must refuse it before calling it. */
#include <onebit_abi.h>

const int32_t onebit_abi_version = ONEBIT_ABI_VERSION + 1;

int32_t onebit_run(void) { return 0; }
