import Foundation
import Synchronization
import TestSupport

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
    /// One per pump thread still running: `close()` closes the descriptors once it is empty.
    private let pumps = DispatchGroup()

    init(targetPort: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard let port = bindLoopback(fd), listen(fd, 8) == 0 else {
            Glibc.close(fd)
            throw HarnessError("proxy listen failed")
        }
        self.port = port
        listener = fd
        let listener = fd
        Thread.detachNewThread { [self] in
            while !closed.load(ordering: .relaxed) {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                guard connectLoopback(upstream, port: targetPort) else {
                    Glibc.close(client)
                    Glibc.close(upstream)
                    continue
                }
                sockets.withLock { $0 += [client, upstream] }
                for (source, destination) in [(client, upstream), (upstream, client)] {
                    pumps.enter()
                    Thread.detachNewThread { [pumps] in
                        TCPProxy.pump(from: source, to: destination)
                        pumps.leave()
                    }
                }
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
        // The descriptors are closed only after the pumps have seen the shutdown and returned
        // (a descriptor number closed under a pump could be reused by another test's socket).
        _ = pumps.wait(timeout: .now() + 5)
        for fd in sockets.withLock({ s in defer { s = [] }; return s }) { Glibc.close(fd) }
    }

    deinit { close() }
}
