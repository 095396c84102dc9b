/* Test tooling only, never shipped: a stand-in bcryptprimitives.dll for Debian's Wine 8.0.
 * Rust's std (1.78+) fills its random keys with ProcessPrng from bcryptprimitives.dll, which
 * Windows 10+ has and Wine 8.0 lacks, so every Rust .exe exits at load there. This exports
 * ProcessPrng on top of RtlGenRandom (advapi32's SystemFunction036), which Wine has.
 * ci/windows/run.sh builds it with mingw-w64 into its own WINEPREFIX's system32. */
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
