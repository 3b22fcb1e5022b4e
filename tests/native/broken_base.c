/* The compiled toy base with one bug: a partial commit_verify keeps the whole batch's state
 * (base check B2 must catch it). */
#define TOY_BROKEN_COMMIT 1
#include "toy_base.c"
