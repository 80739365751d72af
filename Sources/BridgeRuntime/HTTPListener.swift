import BridgeConfig
import FlyingSocks
import Reactor
import Foundation
import ServiceLifecycle
import Synchronization

/// The one HTTP server layer of the bridge, under the metrics endpoint (``MetricsServer``) and
/// the web frontend (``FrontendServer``): a listening socket served by FlyingSocks (FlyingFox's
/// socket layer: an `epoll` pool of its own, off the bridge's event loop), which accepts
/// connections — at most ``Limits/maxConnections`` at once, and at most
/// ``Limits/maxPerClient`` from one remote address, so one client cannot lock the others out;
/// more get a 503 and are closed at once — and hands each to the server's handler in a task of its own, until
/// the graceful shutdown. What a connection carries (one request and its answer, or an event
/// stream) is the handler's; it reads and writes within the limits' timeouts (``read(_:_:)``,
/// ``write(_:_:)``).
struct HTTPListener: Sendable {
    /// Bound and listening since `init`.
    let socket: Socket
    /// The configuration key and value, for errors (`metrics.listen 127.0.0.1:9464`).
    let what: String
    let limits: Limits
    /// The connections being served, in all and by remote address.
    let connections = Connections()

    /// What one server lets its clients hold.
    struct Limits: Sendable {
        /// Connections served at once, event streams included.
        var maxConnections: Int
        /// Connections served at once from one remote IP address.
        var maxPerClient: Int
        /// A connection must send its request (head and body) within this, or is closed.
        var requestTimeout: Duration = .seconds(10)
        /// A write that cannot go on for this long (a client that stopped reading) ends the
        /// connection.
        var writeTimeout: Duration = .seconds(10)
    }

    /// Binds and listens on `host:port` (IPv6 when the host has a colon), so an address in use
    /// or not local stops the start with the reason. The socket is not inherited by the bridge
    /// that `restart` execs.
    init(host: String, port: Int, what: String, limits: Limits) throws(StartupError) {
        self.what = what
        self.limits = limits
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
        let connections = connections
        let limits = limits
        do {
            try await pool.prepare()
            let listener = try AsyncSocket(socket: socket, pool: pool)
            try await cancelWhenGracefulShutdown {
                try await withThrowingDiscardingTaskGroup { group in
                    group.addTask { try await pool.run() }
                    for try await connection in listener.sockets {
                        // Not inherited by the bridge that `restart` execs.
                        _ = fcntl(connection.socket.file.rawValue, F_SETFD, FD_CLOEXEC)
                        let client = Self.clientAddress(connection.socket)
                        guard connections.open(client, limits: limits) else {
                            // A fresh socket takes these few bytes at once (it does not block).
                            _ = try? connection.socket.write(Self.busy)
                            try? connection.close()
                            continue
                        }
                        group.addTask {
                            defer {
                                // Counted out before the client sees the close: it may connect again at once.
                                connections.close(client)
                                try? connection.close()
                            }
                            await serve(connection)
                        }
                    }
                }
            }
        } catch {
            if Task.isCancelled || Task.isShuttingDownGracefully { return }
            throw StartupError("\(what): \(Self.describe(error))")
        }
    }

    /// The answer to a connection over a limit, before it is closed.
    static let busy = Data(HTTPResponse(status: 503, headers: [("Content-Type", "text/plain; charset=utf-8"), ("Retry-After", "10")],
                                        body: Array("too many connections (from your address, or in all): try again later\n".utf8)).bytes)

    static func describe(_ error: any Error) -> String {
        if case let .failed(type, _, message) = error as? SocketError { return "\(type.lowercased()) failed: \(message)" }
        return "\(error)"
    }

    /// The remote IP address of a connection ("" when unknown: such connections share one count).
    static func clientAddress(_ socket: Socket) -> String {
        switch try? socket.remotePeer() {
        case let .ip4(address, _)?: address
        case let .ip6(address, _)?: address
        default: ""
        }
    }

    /// Reads with `body` within the request timeout; nil when it failed or took longer.
    func read<T: Sendable>(_ connection: AsyncSocket, _ body: @escaping @Sendable (AsyncSocket) async throws -> T) async -> T? {
        await withDeadline(limits.requestTimeout) { try? await body(connection) }
    }

    /// Writes `bytes`; false when the connection failed or the client did not take them within
    /// the write timeout (the caller ends the connection).
    func write(_ connection: AsyncSocket, _ bytes: [UInt8]) async -> Bool {
        await withDeadline(limits.writeTimeout) { () async -> Bool? in
            do { try await connection.write(Data(bytes)) } catch { return nil }
            return true
        } ?? false
    }
}

/// Connections being served, in all and by remote address.
final class Connections: Sendable {
    private let state = Mutex<(total: Int, byClient: [String: Int])>((0, [:]))

    /// Counts one more from `client` unless that goes over a limit; whether it was counted.
    func open(_ client: String, limits: HTTPListener.Limits) -> Bool {
        state.withLock { s in
            guard s.total < limits.maxConnections, s.byClient[client, default: 0] < limits.maxPerClient else { return false }
            s.total += 1
            s.byClient[client, default: 0] += 1
            return true
        }
    }

    func close(_ client: String) {
        state.withLock { s in
            s.total -= 1
            let left = s.byClient[client, default: 1] - 1
            s.byClient[client] = left > 0 ? left : nil
        }
    }

    /// How many are served now.
    var count: Int { state.withLock { $0.total } }
}
