import Foundation
import TestSupport
import Testing

/// `config/gatt2mqtt.service` (docs/configuration.md "As a systemd service"): it passes
/// `systemd-analyze verify` without a warning, keeps its contract, and `gatt2mqtt run` speaks
/// `Type=notify` (READY=1 once BlueZ and the broker are up, STOPPING=1 on SIGTERM).
@Suite(.serialized, .timeLimit(.minutes(1))) struct SystemdUnitTests {
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
}
