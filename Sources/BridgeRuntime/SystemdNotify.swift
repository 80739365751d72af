import BridgeConfig
import Glibc
import Reactor
import Synchronization

/// systemd's readiness protocol (`sd_notify(3)`) without libsystemd: one datagram such as
/// `READY=1` to the socket in `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace).
/// Without the variable (not started by systemd with `Type=notify`) it does nothing.
public enum SystemdNotify {
    /// Sends `state` (newline-separated `KEY=value` assignments); returns whether it was sent.
    @discardableResult
    public static func send(_ state: String, socketPath: String? = getenv("NOTIFY_SOCKET").map { String(cString: $0) }) -> Bool {
        guard let path = socketPath, !path.isEmpty, path.hasPrefix("/") || path.hasPrefix("@") else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
        let payload = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, payload, payload.count, Int32(MSG_NOSIGNAL), $0, length) }
        }
        return sent == payload.count
    }

    /// The shortest ping interval (a `WatchdogSec=` of a few milliseconds would otherwise make
    /// the loop do little else).
    public static let minimumWatchdogInterval: Duration = .milliseconds(10)

    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC` (`sd_watchdog_enabled(3)`), at
    /// least ``minimumWatchdogInterval``, at most half of ``DurationLimits/maximum``. Nil — no
    /// pings — without `$NOTIFY_SOCKET`, without `$WATCHDOG_USEC` or when it is not a whole
    /// number above 0, and when `$WATCHDOG_PID` names another process.
    public static func watchdogInterval(_ environment: [String: String]) -> Duration? {
        guard let socket = environment["NOTIFY_SOCKET"], !socket.isEmpty,
              let text = environment["WATCHDOG_USEC"], !text.isEmpty, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let usec = UInt64(text), usec > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], pid != String(getpid()) { return nil }
        let capped = min(usec, UInt64(DurationLimits.maximumSeconds) * 1_000_000)
        guard let micro = Int64(exactly: capped) else { return nil }
        return max(Duration.microseconds(micro) / 2, minimumWatchdogInterval)
    }
}

/// `WATCHDOG=1` every `interval` from `loop`'s own timer (its body runs on the loop's thread):
/// while the loop does not turn — a handler that blocks, a deadlock — no ping goes out, and
/// systemd (`WatchdogSec=`) kills and restarts the bridge.
final class SystemdWatchdog: Sendable {
    let loop: EventLoop
    let interval: Duration
    /// The pending timer, and whether ``stop()`` was called: one value behind one lock.
    private let state = Mutex<(timer: EventLoop.Timer?, stopped: Bool)>((nil, false))

    init(loop: EventLoop, interval: Duration) {
        self.loop = loop
        self.interval = interval
    }

    /// Pings now and then every `interval`.
    func start() {
        SystemdNotify.send("WATCHDOG=1")
        arm()
    }

    private func arm() {
        let timer = loop.schedule(after: interval) { [self] in
            guard !state.withLock({ $0.stopped }) else { return }
            SystemdNotify.send("WATCHDOG=1")
            arm()
        }
        let cancel = state.withLock { s -> Bool in
            if s.stopped { return true }
            s.timer = timer
            return false
        }
        if cancel { timer.cancel() }
    }

    /// No more pings (at shutdown, with STOPPING=1).
    func stop() {
        let timer = state.withLock { s -> EventLoop.Timer? in
            s.stopped = true
            defer { s.timer = nil }
            return s.timer
        }
        timer?.cancel()
    }
}
