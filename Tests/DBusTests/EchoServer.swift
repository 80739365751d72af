import DBus
import Foundation
import Reactor

/// The exported test object: `/org/example/Echo` with interface `org.example.Echo`, owned under
/// the well-known name `org.example.Echo`.
enum EchoServer {
    static let name = "org.example.Echo"
    static let path: DBusObjectPath = "/org/example/Echo"
    static let interface = "org.example.Echo"
    static let basics = "ybnqiuxtdsog"

    static func interfaceDefinition(sockets: AcquiredSockets) -> DBusInterface {
        DBusInterface(interface, methods: [
            DBusMethod("Echo", in: [DBusArgument("value", .variant)], out: [DBusArgument("value", .variant)]) { call in
                [call.arguments[0]]
            },
            DBusMethod("EchoBasics", in: try! DBusType.parse(signature: basics).map { DBusArgument(nil, $0) },
                       out: try! DBusType.parse(signature: basics).map { DBusArgument(nil, $0) }) { call in
                call.arguments
            },
            DBusMethod("EchoManaged", in: [DBusArgument("objects", try! DBusType(signature: "a{oa{sa{sv}}}"))],
                       out: [DBusArgument("objects", try! DBusType(signature: "a{oa{sa{sv}}}"))]) { call in
                call.arguments
            },
            DBusMethod("Upper", in: [DBusArgument("text", .string), DBusArgument("n", .int32)],
                       out: [DBusArgument("text", .string), DBusArgument("twice", .int32)]) { call in
                let text: String = try call.decode(0)
                let n: Int32 = try call.decode(1)
                return [.string(text.uppercased()), .int32(n &* 2)]
            },
            DBusMethod("Fail", in: [DBusArgument("name", .string), DBusArgument("message", .string)]) { call in
                throw DBusError.remote(name: try call.decode(0), message: try call.decode(1))
            },
            DBusMethod("Sleep", in: [DBusArgument("ms", .uint32)]) { call in
                let ms: UInt32 = try call.decode(0)
                try await Task.sleep(for: .milliseconds(Int64(ms)))
                return []
            },
            DBusMethod("BadReturn", out: [DBusArgument(nil, .string)]) { _ in [.int32(1)] },
            // AcquireWrite-like: a socket fd (one end of a socketpair) and an MTU.
            DBusMethod("AcquireWrite", in: [DBusArgument("options", .properties)],
                       out: [DBusArgument("fd", .unixFD), DBusArgument("mtu", .uint16)]) { _ in
                var pair: [Int32] = [-1, -1]
                guard socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0 else {
                    throw DBusError.remote(name: "org.bluez.Error.Failed", message: "socketpair failed")
                }
                let ours = DBusUnixFD(taking: pair[0])
                let theirs = DBusUnixFD(taking: pair[1])
                sockets.keep(ours)
                return [.unixFD(theirs), .uint16(23)]
            },
        ], properties: [
            DBusProperty("Powered", .boolean(false), access: .readwrite),
            DBusProperty("Name", .string("echo")),
            DBusProperty("Count", .uint32(0), access: .readwrite) { value in
                guard case let .uint32(n) = value, n <= 100 else {
                    throw DBusError.remote(name: "org.bluez.Error.InvalidArguments", message: "Count above 100")
                }
                return value
            },
            DBusProperty("Secret", .string("s3"), access: .write),
        ], signals: [DBusSignalDescription("Ping", [DBusArgument("n", .uint32)])])
    }

    /// A connection on `loop` that owns `org.example.Echo` and exports the object.
    static func start(_ bus: PrivateBus, loop: EventLoop, sockets: AcquiredSockets = AcquiredSockets()) async throws -> DBusConnection {
        let c = try await bus.connect(loop: loop)
        try c.export(path, interfaces: [interfaceDefinition(sockets: sockets)])
        let reply = try await c.requestName(name)
        guard reply == .primaryOwner else { throw DBusError.invalidArgument("name: \(reply)") }
        return c
    }
}

/// Server ends of AcquireWrite sockets, so the test can read what the client wrote (one per test).
final class AcquiredSockets: Sendable {
    private let fds = Mutex<[DBusUnixFD]>([])
    func keep(_ fd: DBusUnixFD) { fds.withLock { $0.append(fd) } }
    func take() -> DBusUnixFD? { fds.withLock { $0.popLast() } }
}

import Synchronization
import TestSupport

extension DBusConnection {
    /// Calls the echo server's `Sleep` for `milliseconds`: how it failed (nil: it returned), for
    /// a test that ends the call before the reply (close, cancellation, a lost bus).
    func sleepCallError(milliseconds: UInt32, timeout: Duration) async -> DBusError? {
        do {
            _ = try await echo("Sleep", [.uint32(milliseconds)], timeout: timeout)
            return nil
        } catch {
            return error
        }
    }

    func echo(_ method: String, _ args: [DBusValue], timeout: Duration = .seconds(5)) async throws(DBusError) -> DBusMessage {
        try await call(destination: EchoServer.name, path: EchoServer.path, interface: EchoServer.interface,
                       method: method, arguments: args, timeout: timeout)
    }

    func properties(_ method: String, _ args: [DBusValue], path: DBusObjectPath = EchoServer.path) async throws(DBusError) -> DBusMessage {
        try await call(destination: EchoServer.name, path: path, interface: "org.freedesktop.DBus.Properties",
                       method: method, arguments: args, timeout: .seconds(5))
    }
}
