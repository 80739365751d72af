import DBus
import Foundation
import Reactor
import Synchronization
import TestSupport
import Testing

/// Names of this process' threads (`/proc/self/task/*/comm`).
func threadNames() -> [String] {
    let dir = "/proc/self/task"
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "\(dir)/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
}

/// A connection on an event loop (docs/dbus.md "On an event loop") against a real dbus-daemon.
@Suite("DBus on an event loop", .serialized)
struct LoopModeTests {
    /// An object whose methods report whether they ran on the server's loop thread.
    static func whereAmI(_ loop: EventLoop) -> DBusInterface {
        DBusInterface("org.example.Where", methods: [
            DBusMethod("OnLoop", out: [DBusArgument("onLoop", .boolean)]) { _ in [.boolean(loop.inLoop)] },
            DBusMethod("AfterAwait", out: [DBusArgument("onLoop", .boolean)]) { _ in
                try await loop.sleep(for: .milliseconds(1))
                return [.boolean(loop.inLoop)]
            },
        ], properties: [DBusProperty("Level", .uint32(1), access: .readwrite) { v in
            guard loop.inLoop else { throw DBusError.remote(name: "org.example.NotOnLoop", message: "setter off the loop") }
            return v
        }])
    }

    @Test("calls, replies, remote errors and unknown methods; exported handlers and setters run on the server's loop")
    func callsAndHandlersOnLoop() async throws {
        let serverLoop = EventLoop(name: "t-dbus-server")
        let clientLoop = EventLoop(name: "t-dbus-client")
        defer {
            serverLoop.shutdown()
            clientLoop.shutdown()
        }
        try await withBus { bus in
            let server = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: serverLoop)
            defer { server.close() }
            #expect(server.loop === serverLoop)
            try server.export(EchoServer.path, interfaces: [EchoServer.interfaceDefinition(sockets: AcquiredSockets()),
                                                           Self.whereAmI(serverLoop)])
            #expect(try await server.requestName(EchoServer.name) == .primaryOwner)
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: clientLoop)
            defer { client.close() }
            #expect(client.uniqueName.hasPrefix(":"))

            // From a task preferring the client's loop: it stays on the loop across the call.
            let (upper, stillOnLoop) = try await withTaskExecutorPreference(clientLoop) { () async throws(DBusError) -> (DBusMessage, Bool) in
                let reply = try await client.echo("Upper", [.string("loop"), .int32(21)])
                return (reply, clientLoop.inLoop)
            }
            #expect(try upper.decode(0, as: String.self) == "LOOP")
            #expect(try upper.decode(1, as: Int32.self) == 42)
            #expect(stillOnLoop)

            // From an ordinary task (not on the loop): callers may send from any thread.
            let plain = try await Task.detached { () async throws -> DBusMessage in
                try await client.echo("Echo", [.variant(.uint16(7))])
            }.value
            #expect(plain.body == [.variant(.uint16(7))])

            let onLoop = try await client.call(destination: EchoServer.name, path: EchoServer.path,
                                               interface: "org.example.Where", method: "OnLoop")
            #expect(try onLoop.decode(0, as: Bool.self))
            let afterAwait = try await client.call(destination: EchoServer.name, path: EchoServer.path,
                                                   interface: "org.example.Where", method: "AfterAwait")
            #expect(try afterAwait.decode(0, as: Bool.self))
            try await client.setProperty(destination: EchoServer.name, path: EchoServer.path,
                                         interface: "org.example.Where", name: "Level", value: .uint32(5))
            #expect(server.property(EchoServer.path, interface: "org.example.Where", "Level") == .uint32(5))

            await #expect(throws: DBusError.remote(name: "org.example.Error.Custom", message: "boom")) {
                try await client.echo("Fail", [.string("org.example.Error.Custom"), .string("boom")])
            }
            do throws(DBusError) {
                _ = try await client.echo("NoSuchMethod", [])
                Issue.record("an unknown method answered")
            } catch {
                #expect(error.remoteName == "org.freedesktop.DBus.Error.UnknownMethod")
            }
            // 100 calls in flight at once, all answered.
            let answers = try await withThrowingTaskGroup(of: Int32.self) { group -> Set<Int32> in
                for i in 0..<100 {
                    group.addTask(executorPreference: clientLoop) {
                        try await client.echo("Upper", [.string("x"), .int32(Int32(i))]).decode(1)
                    }
                }
                return try await group.reduce(into: Set<Int32>()) { $0.insert($1) }
            }
            #expect(answers == Set((0..<100).map { Int32($0) * 2 }))
        }
    }

    @Test("callers on other threads and on the loop at once share a loop connection; signals emitted from both arrive")
    func mixedThreads() async throws {
        let loop = EventLoop(name: "t-dbus-mixed")
        defer { loop.shutdown() }
        try await withBus { bus in
            let server = try await EchoServer.start(bus)
            defer { server.close() }
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            defer { client.close() }
            let listener = try await bus.connect()
            defer { listener.close() }
            let heard = SignalCollector(try await listener.signals(matching: DBusMatchRule(sender: client.uniqueName,
                                                                                          interface: EchoServer.interface)))
            let total = try await withThrowingTaskGroup(of: Int.self) { group -> Int in
                for worker in 0..<8 {
                    let onLoop = worker % 2 == 0
                    let body: @Sendable () async throws -> Int = {
                        var n = 0
                        for i in 0..<50 {
                            let text = "w\(worker)-\(i)"
                            let reply = try await client.echo("Upper", [.string(text), .int32(Int32(i))])
                            guard try reply.decode(0, as: String.self) == text.uppercased() else { return -1 }
                            if i % 10 == 0 {
                                try client.emitSignal(path: EchoServer.path, interface: EchoServer.interface, member: "Ping",
                                                      arguments: [.uint32(UInt32(worker * 100 + i))])
                            }
                            n += 1
                        }
                        return n
                    }
                    if onLoop { group.addTask(executorPreference: loop, operation: body) } else { group.addTask(operation: body) }
                }
                return try await group.reduce(0, +)
            }
            #expect(total == 400)
            let signals = await heard.wait(count: 40)
            #expect(Set(signals.compactMap { try? $0.decode(0, as: UInt32.self) }).count == 40)
        }
    }

    @Test("a call with no answer times out on the loop's timers; a cancelled call is cancelled")
    func timeoutAndCancel() async throws {
        let loop = EventLoop(name: "t-dbus-timeout")
        defer { loop.shutdown() }
        try await withBus { bus in
            let server = try await EchoServer.start(bus)
            defer { server.close() }
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            defer { client.close() }
            let start = ContinuousClock.now
            do throws(DBusError) {
                _ = try await client.echo("Sleep", [.uint32(3000)], timeout: .milliseconds(150))
                Issue.record("Sleep answered within its timeout")
            } catch {
                guard case let .timeout(method, ms) = error else {
                    Issue.record("expected a timeout, got \(error)")
                    return
                }
                #expect(method == "org.example.Echo.Sleep")
                #expect(ms == 150)
            }
            #expect(ContinuousClock.now - start < .seconds(2))
            let call = Task { () async throws -> DBusMessage in
                try await client.echo("Sleep", [.uint32(3000)], timeout: .seconds(10))
            }
            try await Task.sleep(for: .milliseconds(50))
            call.cancel()
            await #expect(throws: DBusError.cancelled) { try await call.value }
            // The connection still works afterwards.
            #expect(try await client.echo("Echo", [.variant(.string("ok"))]).body == [.variant(.string("ok"))])
        }
    }

    @Test("signals reach a subscriber on the loop, in order; the stream ends when the connection closes")
    func signalsOnLoop() async throws {
        let loop = EventLoop(name: "t-dbus-signals")
        defer { loop.shutdown() }
        try await withBus { bus in
            let server = try await EchoServer.start(bus)
            defer { server.close() }
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            let stream = try await client.signals(matching: DBusMatchRule(sender: EchoServer.name, interface: EchoServer.interface,
                                                                           member: "Ping"))
            for n in 0..<50 {
                try server.emitSignal(path: EchoServer.path, interface: EchoServer.interface, member: "Ping",
                                      arguments: [.uint32(UInt32(n))])
            }
            let (received, onLoop) = try await withTaskExecutorPreference(loop) { () async throws -> ([UInt32], [Bool]) in
                var got: [UInt32] = []
                var flags: [Bool] = []
                for try await m in stream {
                    got.append(try m.decode(0))
                    flags.append(loop.inLoop)
                    if got.count == 50 { break }
                }
                return (got, flags)
            }
            #expect(received == (0..<50).map { UInt32($0) })
            #expect(onLoop.allSatisfy { $0 })
            // A second subscription ends with .disconnected when the connection is closed.
            let other = SignalCollector(try await client.signals(matching: DBusMatchRule(interface: EchoServer.interface)))
            client.close()
            #expect(await other.waitEnd() == .some(.disconnected))
            #expect(!client.isConnected)
        }
    }

    @Test("unix fds pass through a loop connection both ways")
    func fdPassing() async throws {
        let serverLoop = EventLoop(name: "t-dbus-fd-server")
        let clientLoop = EventLoop(name: "t-dbus-fd-client")
        defer {
            serverLoop.shutdown()
            clientLoop.shutdown()
        }
        try await withBus { bus in
            let sockets = AcquiredSockets()
            let server = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: serverLoop)
            defer { server.close() }
            try server.export(EchoServer.path, interfaces: [EchoServer.interfaceDefinition(sockets: sockets)])
            #expect(try await server.requestName(EchoServer.name) == .primaryOwner)
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: clientLoop)
            defer { client.close() }
            let reply = try await client.echo("AcquireWrite", [.properties([:])])
            let theirs = try reply.decode(0, as: DBusUnixFD.self)
            #expect(try reply.decode(1, as: UInt16.self) == 23)
            let mine = try theirs.duplicate()
            defer { close(mine) }
            let bytes: [UInt8] = [1, 2, 3]
            #expect(bytes.withUnsafeBytes { send(mine, $0.baseAddress, 3, Int32(MSG_NOSIGNAL)) } == 3)
            let serverEnd = try #require(sockets.take())
            var buffer = [UInt8](repeating: 0, count: 16)
            let n = buffer.withUnsafeMutableBytes { recv(serverEnd.fileDescriptor, $0.baseAddress, 16, 0) }
            #expect(Array(buffer[..<max(0, n)]) == bytes)
            // The other way: the client sends an fd, the server echoes it back as a variant.
            var pair: [Int32] = [-1, -1]
            #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0)
            let sent = DBusUnixFD(taking: pair[0])
            defer { close(pair[1]) }
            let back = try await client.echo("Echo", [.variant(.unixFD(sent))])
            guard case let .variant(.unixFD(echoed))? = back.body.first else {
                Issue.record("no fd came back: \(back.body)")
                return
            }
            #expect(echoed.fileDescriptor != sent.fileDescriptor)
            #expect([UInt8](arrayLiteral: 9).withUnsafeBytes { send(echoed.fileDescriptor, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) } == 1)
            let m = buffer.withUnsafeMutableBytes { recv(pair[1], $0.baseAddress, 16, 0) }
            #expect(m == 1 && buffer[0] == 9)
        }
    }

    @Test("no dispatch thread; close and a lost bus leave no watch, timer or hook on the loop")
    func teardownLeavesNothing() async throws {
        let loop = EventLoop(name: "t-dbus-teardown")
        defer { loop.shutdown() }
        let empty = EventLoop.Registrations(watches: 0, timers: 0, hooks: 0)
        #expect(await loop.registrations() == empty)
        try await withBus { bus in
            let server = try await EchoServer.start(bus)
            defer { server.close() }
            // The server (dispatch-thread mode) has its thread; the loop client adds none.
            let dispatchThreadsBefore = threadNames().filter { $0 == "dbus-dispatch" }.count
            #expect(dispatchThreadsBefore >= 1)
            let client = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            _ = try await client.echo("Echo", [.variant(.byte(1))])
            let pending = Task { () async throws -> DBusMessage in
                try await client.echo("Sleep", [.uint32(5000)], timeout: .seconds(20))
            }
            try await Task.sleep(for: .milliseconds(50))
            let live = await loop.registrations()
            #expect(live.watches >= 1 && live.timers >= 1 && live.hooks == 1)
            #expect(threadNames().filter { $0 == "dbus-dispatch" }.count <= dispatchThreadsBefore)
            client.close()
            await #expect(throws: DBusError.disconnected) { try await pending.value }
            await #expect(throws: DBusError.disconnected) { try await client.echo("Echo", [.variant(.byte(1))]) }
            #expect(await Self.settle(loop) == empty)

            // The bus goes away under a second connection: it notices on the loop and cleans up.
            let again = try await DBusConnection.connect(.address(bus.address), timeout: .seconds(10), loop: loop)
            let stream = SignalCollector(try await again.signals(matching: DBusMatchRule(interface: EchoServer.interface)))
            let waiting = Task { () async throws -> DBusMessage in
                try await again.echo("Sleep", [.uint32(5000)], timeout: .seconds(20))
            }
            try await Task.sleep(for: .milliseconds(50))
            bus.stop()
            await #expect(throws: DBusError.disconnected) { try await waiting.value }
            #expect(await stream.waitEnd() == .some(.disconnected))
            #expect(!again.isConnected)
            #expect(await Self.settle(loop) == empty)
            again.close()  // idempotent after loss
        }
    }

    /// The loop's registrations once teardown had time to finish (it runs on the loop, shortly
    /// after close or loss).
    static func settle(_ loop: EventLoop) async -> EventLoop.Registrations {
        var r = await loop.registrations()
        for _ in 0..<100 where r != EventLoop.Registrations(watches: 0, timers: 0, hooks: 0) {
            try? await Task.sleep(for: .milliseconds(10))
            r = await loop.registrations()
        }
        return r
    }
}
