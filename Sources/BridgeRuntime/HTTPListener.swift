import BridgeConfig
import FlyingSocks
import Reactor
import Foundation
import ServiceLifecycle
import Synchronization

/// The one HTTP server layer of the bridge, under the metrics endpoint (``MetricsServer``) and
/// the web frontend (``FrontendServer``): a listening socket served by FlyingSocks (FlyingFox's
/// socket layer: an `epoll` pool of its own, off the bridge's event loop), which accepts
/// connections — at most ``maxConnections`` at once, more are closed at once — and hands each to
/// the server's handler in a task of its own, until the graceful shutdown. What a connection
/// carries (one request and its answer, or an event stream) is the handler's.
struct HTTPListener: Sendable {
    /// Bound and listening since `init`.
    let socket: Socket
    /// The configuration key and value, for errors (`metrics.listen 127.0.0.1:9464`).
    let what: String
    let maxConnections: Int

    /// Binds and listens on `host:port` (IPv6 when the host has a colon), so an address in use
    /// or not local stops the start with the reason. The socket is not inherited by the bridge
    /// that `restart` execs.
    init(host: String, port: Int, what: String, maxConnections: Int) throws(StartupError) {
        self.what = what
        self.maxConnections = maxConnections
        do {
            socket = host.contains(":")
                ? try Self.listen(try sockaddr_in6.inet6(ip6: host, port: UInt16(port)))
                : try Self.listen(try sockaddr_in.inet(ip4: host, port: UInt16(port)))
        } catch {
            throw StartupError("\(what): \(Self.describe(error))")
        }
    }

    private static func listen<A: SocketAddress>(_ address: A) throws -> Socket {
        let socket = try Socket(domain: Int32(A.family), type: .stream)
        do {
            _ = fcntl(socket.file.rawValue, F_SETFD, FD_CLOEXEC)
            try socket.setValue(true, for: .localAddressReuse)
            try socket.bind(to: address)
            try socket.listen()
            return socket
        } catch {
            try? socket.close()
            throw error
        }
    }

    /// Accepts and serves until the graceful shutdown (or cancellation), then closes the socket.
    /// Each connection is closed when `serve` returns.
    func run(_ serve: @escaping @Sendable (AsyncSocket) async -> Void) async throws {
        defer { try? socket.close() }
        let pool: some AsyncSocketPool = .ePoll()
        let active = ConnectionCount()
        let maxConnections = maxConnections
        do {
            try await pool.prepare()
            let listener = try AsyncSocket(socket: socket, pool: pool)
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    group.addTask { try await pool.run() }
                    for try await connection in listener.sockets {
                        // Not inherited by the bridge that `restart` execs.
                        _ = fcntl(connection.socket.file.rawValue, F_SETFD, FD_CLOEXEC)
                        guard active.open() <= maxConnections else {
                            active.close()
                            try? connection.close()
                            continue
                        }
                        group.addTask {
                            defer { try? connection.close() }
                            await serve(connection)
                            active.close()
                        }
                    }
                }
            }
        } catch {
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            throw StartupError("\(what): \(Self.describe(error))")
        }
    }

    static func describe(_ error: any Error) -> String {
        if case let .failed(type, _, message) = error as? SocketError { return "\(type.lowercased()) failed: \(message)" }
        return "\(error)"
    }
}

/// Connections being served.
final class ConnectionCount: Sendable {
    private let count = Atomic(0)
    /// Counts one more; returns how many there are now.
    func open() -> Int { count.add(1, ordering: .relaxed).newValue }
    func close() { count.subtract(1, ordering: .relaxed) }
}
