// epoll(7) for Reactor.EventLoop: Glibc's Swift module does not carry <sys/epoll.h>, and
// `struct epoll_event` is packed on x86_64, so these helpers move its fields as plain integers.
#include <sys/epoll.h>
#include <stdint.h>
#include <unistd.h>
#include <fcntl.h>

static inline int reactor_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// op: EPOLL_CTL_ADD / MOD / DEL; events: EPOLLIN | EPOLLOUT (errors and hang-ups always reported).
static inline int reactor_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    return epoll_ctl(epfd, op, fd, &ev);
}

/// Waits up to `timeout` ms; fills events[i]/data[i] for each ready descriptor (at most `max`, ≤ 64).
static inline int reactor_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout) {
    struct epoll_event evs[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, evs, max, timeout);
    for (int i = 0; i < n; i++) {
        events[i] = evs[i].events;
        data[i] = evs[i].data.u64;
    }
    return n;
}

static inline int reactor_epoll_ctl_add(void) { return EPOLL_CTL_ADD; }
static inline int reactor_epoll_ctl_mod(void) { return EPOLL_CTL_MOD; }
static inline int reactor_epoll_ctl_del(void) { return EPOLL_CTL_DEL; }
