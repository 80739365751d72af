import Foundation
import TestSupport
import Testing

/// `config/gatt2mqtt.service` (docs/configuration.md "As a systemd service"): it passes
/// `systemd-analyze verify` without a warning, keeps its contract, and `gatt2mqtt run` speaks
/// `Type=notify` (READY=1 once BlueZ and the broker are up, STOPPING=1 on SIGTERM, WATCHDOG=1
/// from its event loop at half `$WATCHDOG_USEC`).
@Suite(.serialized, .timeLimit(.minutes(5))) struct SystemdUnitTests {
    static let unit = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("config/gatt2mqtt.service")

    static func lines() throws -> [String] {
        try String(contentsOf: unit, encoding: .utf8).split(separator: "\n").map(String.init)
    }

    @Test func unitKeepsItsContract() throws {
        let l = Set(try Self.lines())
        for key in ["Type=notify", "StateDirectory=gatt2mqtt", "SupplementaryGroups=bluetooth", "ProtectSystem=strict",
                    "NoNewPrivileges=yes", "Restart=on-failure", "DynamicUser=yes", "PrivateDevices=yes",
                    "Environment=GATT2MQTT_DATABASE_PATH=%S/gatt2mqtt/gatt2mqtt.sqlite"] {
            #expect(l.contains(key), "\(key)")
        }
        #expect(try Self.lines().contains { $0.hasPrefix("ExecStart=/usr/local/bin/gatt2mqtt run --config ") })
        // systemctl reload is the bridge's SIGHUP reload; a frozen event loop is restarted.
        #expect(l.contains("ExecReload=/bin/kill -HUP $MAINPID"))
        #expect(try Self.lines().contains { $0.hasPrefix("WatchdogSec=") })
    }

    /// systemd-analyze exits 0 even for unknown keys or values (it only warns), so any output fails.
    @Test func unitPassesSystemdAnalyzeVerifyWithoutWarnings() async throws {
        let dir = try TemporaryDirectory()
        // verify checks that ExecStart is executable: point it at the binary under test.
        let text = try String(contentsOf: Self.unit, encoding: .utf8)
            .replacingOccurrences(of: "ExecStart=/usr/local/bin/gatt2mqtt", with: "ExecStart=\(CLI.executable.path)")
        let copy = dir.path + "/gatt2mqtt.service"
        try text.write(toFile: copy, atomically: true, encoding: .utf8)
        let (status, output) = try await offThePool { () throws -> (Int32, String) in
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-analyze")
            p.arguments = ["verify", copy]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = out
            try p.run()
            let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            return (p.terminationStatus, output)
        }
        #expect(status == 0 && output.isEmpty, "systemd-analyze verify: \(output)")
    }

    @Test func runSaysReadyThenStopping() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let socketPath = env.directory.path + "/notify.sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(bindUnix(fd, path: socketPath))
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(fd, &buffer, buffer.count, 0)
            return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
        }
        let hub = try await env.broker.client(loop: env.loop)
        let state = try await hub.subscribe("gatt2mqtt/bridge/state")
        let bridge = try env.startBridge(devices: "  []", environment: ["NOTIFY_SOCKET": socketPath])
        let ready = receive()
        #expect(ready?.split(separator: "\n").contains("READY=1") == true, "\(ready ?? "nothing within 20 s")")
        // READY comes after the broker accepted the bridge: its online state is (being) published.
        #expect(await collect(state, count: 1).first?.payloadString == #"{"state":"online"}"#)
        kill(bridge.processIdentifier, SIGTERM)
        let stopping = receive()
        #expect(stopping == "STOPPING=1", "\(stopping ?? "nothing within 20 s")")
        await bridge.exited()
        #expect(bridge.terminationStatus == 0)
        await hub.disconnect()
    }

    static func gaps(_ pings: [ContinuousClock.Instant]) -> [Duration] { zip(pings.dropFirst(), pings).map { $0 - $1 } }

    /// Binds `fd` to `name` in the abstract namespace (`@name` as `$NOTIFY_SOCKET` says it).
    static func bindAbstract(_ fd: Int32, name: String) -> Bool {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes: [UInt8] = [0] + Array(name.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } } == 0
    }

    /// `WatchdogSec=`: with `$WATCHDOG_USEC` (200 ms here) the bridge sends WATCHDOG=1 every
    /// 100 ms from its event loop, to an abstract-namespace `$NOTIFY_SOCKET`; while the loop is
    /// blocked (3 s, by the test-only `TEST_GATT2MQTT_FREEZE_ON_TOPIC` hook) none comes, then
    /// they resume.
    @Test func runPingsTheWatchdogFromItsEventLoop() async throws {
        let env = try await EndToEnd()
        defer { env.stop() }
        let name = "gatt2mqtt-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require(Self.bindAbstract(fd, name: name))
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        /// Datagrams with when they arrived, until `done` says so, one is 20 s late or 20 s passed.
        func receive(until done: @escaping @Sendable ([(String, ContinuousClock.Instant)]) -> Bool) async -> [(String, ContinuousClock.Instant)] {
            await offThePool {
                var got: [(String, ContinuousClock.Instant)] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                let end = ContinuousClock.now + .seconds(20)
                while !done(got), ContinuousClock.now < end {
                    let n = recv(fd, &buffer, buffer.count, 0)
                    guard n > 0 else { break }
                    got.append((String(decoding: buffer[0..<n], as: UTF8.self), .now))
                }
                return got
            }
        }
        let freeze = "gatt2mqtt/bridge/request/freeze"
        let bridge = try env.startBridge(devices: "  []", environment: ["NOTIFY_SOCKET": "@" + name, "WATCHDOG_USEC": "200000",
                                                                        "TEST_GATT2MQTT_FREEZE_ON_TOPIC": freeze])
        let first = await receive { got in got.filter { $0.0 == "WATCHDOG=1" }.count >= 5 }
        #expect(first.first?.0.split(separator: "\n").contains("READY=1") == true, "\(first.map(\.0))")
        let before = first.filter { $0.0 == "WATCHDOG=1" }.map(\.1)
        #expect(before.count == 5, "\(first.map(\.0))")
        #expect(Self.gaps(before).allSatisfy { $0 < .seconds(1) }, "\(Self.gaps(before))")

        let hub = try await env.broker.client(loop: env.loop)
        try await hub.publish(topic: freeze, payload: Array("3".utf8), qos: .atLeastOnce)
        let published = ContinuousClock.now
        // Pings from the publish on (any sent before it and not yet read are read at once, so
        // they count as at the publish), until one came at least 2.5 s after the one before it,
        // and three more after that.
        let after = await receive { got in
            let pings = [published] + got.filter { $0.0 == "WATCHDOG=1" }.map(\.1)
            guard let i = Self.gaps(pings).firstIndex(where: { $0 >= .milliseconds(2500) }) else { return false }
            return pings.count >= i + 5
        }.filter { $0.0 == "WATCHDOG=1" }.map(\.1)
        let gaps = Self.gaps([published] + after)
        let longest = gaps.max() ?? .zero
        #expect(longest >= .milliseconds(2500) && longest < .seconds(6), "\(gaps)")
        #expect(gaps.last.map { $0 < .seconds(1) } == true, "the pings did not resume: \(gaps)")
        await hub.disconnect()
        kill(bridge.processIdentifier, SIGTERM)
        await bridge.exited()
    }
}
