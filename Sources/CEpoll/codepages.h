// userfaultfd(2) for Reactor.CodePages: a write-protect registration (asynchronous: the kernel
// resolves any write fault itself, nobody reads the descriptor) sets VM_UFFD_WP on a mapping, and
// the kernel then maps a file-backed mapping's pages one by one as they are touched instead of
// the 64 KiB (or whole large folio) around each fault ("fault-around"). Glibc has no wrapper.
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

/// A userfaultfd with asynchronous write protection (Linux ≥ 6.7), or -errno (ENOSYS without the
/// system call, EPERM under a seccomp filter that refuses it, EINVAL on a kernel without WP_ASYNC).
/// User-mode faults only, which an unprivileged process may ask for.
static inline int reactor_uffd_open_wp_async(void) {
#ifdef SYS_userfaultfd
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0) return -errno;
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
#else
    return -ENOSYS;
#endif
}

/// Registers [start, start + length) (page-aligned, whole mappings) for write protection: 0 or -errno.
static inline int reactor_uffd_register_wp(int fd, uint64_t start, uint64_t length) {
    struct uffdio_register reg = { .range = { .start = start, .len = length }, .mode = UFFDIO_REGISTER_MODE_WP };
    return ioctl(fd, UFFDIO_REGISTER, &reg) < 0 ? -errno : 0;
}
