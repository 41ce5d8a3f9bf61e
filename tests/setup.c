/* setup.c: what every test process needs before its first test. */
#include "check.h"

/* GSL's default handler aborts; the library reports through statuses. */
__attribute__((constructor)) static void setup(void) { mha_program_init(); }
