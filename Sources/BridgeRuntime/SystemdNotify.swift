import Glibc

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
}
