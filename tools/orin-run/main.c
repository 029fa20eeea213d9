/* placeholder until the CLI lands */
#include <stdio.h>
int main(void) { fputs("orin-run: not built yet\n", stderr); return 1; }
