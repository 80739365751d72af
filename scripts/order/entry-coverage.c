// Function-entry coverage for scripts/gen-order (profiling only; never linked into gatt2mqtt).
// Loaded with LD_PRELOAD into the bridge: writes an int3 over the first byte of every function
// listed in COV_SYMS (hex offsets from the load address, sorted), and on each trap restores the
// byte, appends the offset to COV_OUT once, and resumes. Only the process whose executable is
// COV_EXE is instrumented. Run it with SWIFT_BACKTRACE=enable=no (the backtracer wants SIGTRAP).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>

static uintptr_t base;
static uintptr_t *offs;
static unsigned char *orig;
static unsigned char *hit;
static size_t n;
static int outfd = -1;

static int first_phdr(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size; *(uintptr_t *)data = info->dlpi_addr; return 1;
}
static long find(uintptr_t off) {
    size_t lo = 0, hi = n;
    while (lo < hi) { size_t mid = (lo + hi) / 2; if (offs[mid] < off) lo = mid + 1; else hi = mid; }
    return (lo < n && offs[lo] == off) ? (long)lo : -1;
}
static void on_trap(int sig, siginfo_t *si, void *ctx) {
    (void)sig; (void)si;
    ucontext_t *uc = ctx;
    uintptr_t addr = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] - 1;
    long i = find(addr - base);
    if (i < 0) { static const char m[] = "cov: foreign SIGTRAP\n"; write(2, m, sizeof m - 1); _exit(99); }
    *(volatile unsigned char *)addr = orig[i];
    if (!__atomic_exchange_n(&hit[i], 1, __ATOMIC_SEQ_CST)) {
        char buf[24]; int k = 0; uintptr_t v = offs[i]; char tmp[20]; int t = 0;
        do { tmp[t++] = "0123456789abcdef"[v & 15]; v >>= 4; } while (v);
        while (t) buf[k++] = tmp[--t];
        buf[k++] = '\n';
        write(outfd, buf, k);
    }
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)addr;
}
/* The bridge installs a crash handler for SIGTRAP too (BridgeRuntime's CrashTrace), which would
 * take the traps of the function entries: once this preload owns SIGTRAP, the program's own
 * sigaction(SIGTRAP, …) is acknowledged and ignored. */
static int owns_trap;
typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
static sigaction_fn real_sigaction(void) {
    static sigaction_fn real;
    if (!real) real = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    return real;
}
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (sig == SIGTRAP && owns_trap && act) {
        if (old) memset(old, 0, sizeof *old);
        return 0;
    }
    return real_sigaction()(sig, act, old);
}

__attribute__((constructor)) static void cov_init(void) {
    const char *syms = getenv("COV_SYMS"), *out = getenv("COV_OUT");
    if (!syms || !out) return;
    unsetenv("LD_PRELOAD");
    char exe[4096]; ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *want = getenv("COV_EXE");
    if (len <= 0 || !want) return;
    exe[len] = 0;
    if (strcmp(exe, want) != 0) return;
    dl_iterate_phdr(first_phdr, &base);
    FILE *f = fopen(syms, "r"); if (!f) return;
    size_t cap = 1 << 20; offs = malloc(cap * sizeof *offs);
    unsigned long v; while (fscanf(f, "%lx", &v) == 1) { if (n == cap) offs = realloc(offs, (cap *= 2) * sizeof *offs); offs[n++] = v; }
    fclose(f);
    orig = malloc(n); hit = calloc(n, 1);
    outfd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0644);
    uintptr_t lo = base + offs[0], hi = base + offs[n - 1] + 1;
    long pg = sysconf(_SC_PAGESIZE);
    lo &= ~(uintptr_t)(pg - 1); hi = (hi + pg - 1) & ~(uintptr_t)(pg - 1);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) { perror("cov: mprotect"); return; }
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap; sa.sa_flags = SA_SIGINFO | SA_NODEFER; sigemptyset(&sa.sa_mask);
    real_sigaction()(SIGTRAP, &sa, NULL);
    owns_trap = 1;
    for (size_t i = 0; i < n; i++) { unsigned char *p = (unsigned char *)(base + offs[i]); orig[i] = *p; *p = 0xCC; }
}
