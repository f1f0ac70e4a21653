// Prints the arguments it was given, one per line, as the C runtime split its command line: what
// __test__/windows.test.mjs puts on PATH as `bash` to see what a template tool's command hands
// its program through cmd.exe. Built with zig by scripts/cross/windows-wine.sh; never shipped.
#include <stdio.h>
int _dowildcard = 0; // no wildcard expansion of the arguments
int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) printf("%s\n", argv[i]);
  return 0;
}
