// A stand-in for Windows's bcryptprimitives.dll, which Wine 8.0 lacks: every Rust program since
// 1.78 (this addon too) takes its random bytes from its ProcessPrng. This one forwards to
// RtlGenRandom (advapi32's SystemFunction036), which Wine has. Built with zig by
// scripts/cross/windows-wine.sh and copied into the Wine prefix only: never shipped.
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG n = length > 0x10000000 ? 0x10000000 : (ULONG)length;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}
