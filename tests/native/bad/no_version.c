/* A loop that does not say which ABI version it was built for. */
#include <stdint.h>

int32_t onebit_run(void) { return 0; }
