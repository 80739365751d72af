import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy in front of the broker; `close()` cuts every connection abruptly
/// (no MQTT DISCONNECT), as a crash or a pulled cable would.
final class TCPProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let sockets = Mutex<[Int32]>([])
    private let closed = Atomic<Bool>(false)

    init(targetPort: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        } && listen(fd, 8) == 0
        guard listening else {
            Glibc.close(fd)
            throw HarnessError("proxy listen failed")
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = fd
        let listener = fd
        Thread.detachNewThread { [self] in
            while !closed.load(ordering: .relaxed) {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var target = sockaddr_in()
                target.sin_family = sa_family_t(AF_INET)
                target.sin_addr.s_addr = inet_addr("127.0.0.1")
                target.sin_port = in_port_t(UInt16(targetPort).bigEndian)
                let ok = withUnsafePointer(to: &target) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                    }
                }
                guard ok else {
                    Glibc.close(client)
                    Glibc.close(upstream)
                    continue
                }
                sockets.withLock { $0 += [client, upstream] }
                Thread.detachNewThread { TCPProxy.pump(from: client, to: upstream) }
                Thread.detachNewThread { TCPProxy.pump(from: upstream, to: client) }
            }
        }
    }

    private static func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(source, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            var sent = 0
            while sent < n {
                let m = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                if m <= 0 { return }
                sent += m
            }
        }
        shutdown(destination, Int32(SHUT_RDWR))
    }

    /// Cuts every proxied connection and stops listening. Idempotent.
    func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
        for fd in sockets.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
        // The fds are closed only after the pumps have seen the shutdown.
        usleep(50_000)
        for fd in sockets.withLock({ s in defer { s = [] }; return s }) { Glibc.close(fd) }
    }

    deinit { close() }
}
