import Foundation
import Mosquitto
import TestSupport
import Testing

/// Two central adapters on one bluetoothd (issue 14 on the real stack): radio.py `--centrals 2`
/// gives the kernel hci0 and hci1, both on the radio of the peripherals. Two bridges on one
/// bluetoothd as the nodes of a cluster (node a on hci0, node b on hci1), and two adapters in one
/// bridge. Nested in `RealStackTests`, so it shares its `.serialized` (one VM, one radio) and its
/// condition. Scenario table: docs/bluez.md, "The real stack".
extension RealStackTests {
    @Suite struct Adapters {
        /// The heart-rate sensor of the cluster tests (`Cluster.address`, device `heart`).
        static let heart = Cluster.address
        /// A second heart-rate sensor, for two devices in one bridge.
        static let heart2 = "C0:FF:EE:00:00:05"
        /// 2A39, the heart-rate control point, where a command writes 01.
        static let controlPoint = "00002a39-0000-1000-8000-00805f9b34fb"
        /// The public addresses radio.py gives the kernel's controllers (`--central-address` + index).
        static let central = ["hci0": "F0:F0:F0:F0:F0:01", "hci1": "F0:F0:F0:F0:F0:02"]

        /// Starts node `node` of a cluster (the cluster tests' timings, `heart` as the device) on
        /// `adapter`, logging to `<node>.log` (debug: a failed connect is logged there).
        /// `lost_after` is 60 s: a node that claimed the sensor keeps its claim while it cannot
        /// reach it (2 s in the emulator's tests).
        static func startNode(_ stack: RealStack, _ node: String, adapter: String) throws {
            let yaml = Cluster.nodeYAML(node, lostAfter: "60s")
            try stack.startBridge(named: node, config: stack.bridgeConfig(devices: RunEndToEndTests.heartControl, adapter: adapter,
                                                                          mqtt: yaml.mqtt, top: yaml.top, database: node),
                                  logLevel: "debug")
        }

        /// The central (its address) the peripheral at `address` is connected to, as the radio sees it.
        static func peer(_ stack: RealStack, _ address: String) throws -> String? {
            let p = try stack.peripheral(address)
            return p["connected"] as? Bool == true ? p["peer"] as? String : nil
        }

        /// The ends of the named bridges' logs, for a failure message.
        static func logs(_ stack: RealStack, _ names: String...) -> String {
            names.map { "--- \($0):\n" + stack.bridgeLog($0).suffix(2500) }.joined(separator: "\n")
        }

        /// The nodes' logs and the radio's, for a failure that must say why it happened (the
        /// stack's directory is gone after the test).
        static func diagnosis(_ stack: RealStack, _ names: String...) -> String {
            names.map { "--- \($0):\n" + stack.bridgeLog($0).suffix(4000) }.joined(separator: "\n")
                + "\n--- radio:\n" + stack.file(stack.radioLog).suffix(3000)
        }

        /// Two bridges on one bluetoothd: node a on hci0, node b on hci1, one broker, the same
        /// device. One node claims the sensor (whichever reports it first: both see it at the same
        /// signal); a command is written once, through that node's adapter, and answered by it.
        /// Then the owner is killed (SIGKILL): its Will comes at once (the broker sees the socket
        /// close) and the other node claims the sensor. bluetoothd keeps the link the dead client
        /// made (the sensor, connected, advertises to nobody), so the new owner closes it — it is
        /// held through another adapter of its own daemon (`BLEAdapterControl.takeOver`) — and connects
        /// through its own adapter: the command is written once, answered by it. The killed node,
        /// restarted as its service manager would, does not own the sensor and leaves it alone.
        @Test func twoBridgesOnOneBluetoothd() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"], centrals: 2)
            defer { stack.stop() }
            let adapter = ["a": "hci0", "b": "hci1"]
            let hub = try await stack.broker.client(loop: stack.loop)
            let states = try await hub.subscribe("gatt2mqtt/bridge/nodes/+/state")
            let claims = try await Claims(hub)
            let commands = try await Commands(hub)
            for node in ["a", "b"] { try Self.startNode(stack, node, adapter: adapter[node]!) }
            let (online, seen) = await Cluster.online(states, nodes: ["a", "b"], timeout: .seconds(60))
            try #require(online == ["a", "b"], "nodes online: \(online) (\(seen.map(\.payloadString)))\n\(Self.logs(stack, "a", "b"))")

            // Both may claim at once (each with epoch 1): the lower id wins, so the owner is the
            // node that answers, and its claim the one retained.
            _ = try await claims.waitFor("by a node", timeout: RealStack.slow, context: { Self.diagnosis(stack, "a", "b") }) { $0.node != nil }
            // The first claim seen may be the one that loses (both claimed epoch 1 and b's settled
            // before a's came: a CI run saw b take the command, then a win). The loser leaves the
            // command it has not written to the winner, which held it: one answer, from the winner.
            let before = try await commands.run("before", timeout: RealStack.slow)
            let owner = try #require(before.node, "\(before)"), other = owner == "a" ? "b" : "a"
            #expect(before.status == "ok", "\(before)\n\(Self.logs(stack, "a", "b"))")
            let first = try await Claims(hub).waitFor("in force, by \(owner)", timeout: .seconds(5)) { $0.node == owner }
            #expect(try stack.writes(Self.heart, Self.controlPoint, value: "01") == 1)
            #expect(try Self.peer(stack, Self.heart) == Self.central[adapter[owner]!])

            let killed = ContinuousClock.now
            await stack.stopBridge(named: owner, SIGKILL)
            _ = try await claims.waitFor("by node \(other) after \(owner) was killed", timeout: .seconds(30),
                                         context: { Self.diagnosis(stack, "a", "b") }) {
                $0.node == other && $0.epoch > first.epoch
            }
            RealStackFigures.record("two bridges on one bluetoothd: kill -9 of the owner to the other node's claim", ContinuousClock.now - killed)
            try await commands.send("after")
            let after = try await commands.final("after", timeout: RealStack.slow)
            RealStackFigures.record("two bridges on one bluetoothd: kill -9 of the owner to the other node's ok (the kept link closed)",
                                    ContinuousClock.now - killed)
            #expect(after.status == "ok" && after.node == other, "\(after)\n\(Self.logs(stack, "a", "b"))")
            #expect(stack.bridgeLog(other).contains("closed a link another bridge left"), "\(Self.logs(stack, other))")
            #expect(try Self.peer(stack, Self.heart) == Self.central[adapter[other]!])
            #expect(try stack.writes(Self.heart, Self.controlPoint, value: "01") == 2, "one write per command")

            // The killed node comes back: not the owner, it takes nothing; commands stay with the other.
            try Self.startNode(stack, owner, adapter: adapter[owner]!)
            let (back, _) = await Cluster.online(states, nodes: [owner], timeout: .seconds(60))
            #expect(back == [owner])
            let again = try await commands.run("again", timeout: RealStack.slow)
            #expect(again.status == "ok" && again.node == other, "\(again)")
            #expect(try stack.writes(Self.heart, Self.controlPoint, value: "01") == 3, "one write per command")
            #expect(try Self.peer(stack, Self.heart) == Self.central[adapter[other]!])
            #expect(commands.oks().count == 3, "responses: \(commands.responses)")
            let retained = try await Claims(hub).waitFor("retained", timeout: .seconds(5)) { _ in true }
            #expect(retained.node == other, "the claim in force: \(retained); claims: \(claims.seen)")
            await hub.disconnect()
        }

        /// Two adapters in one bridge (`bluetooth.adapters: [hci0, hci1]`): two sensors connected;
        /// the adapter of one is powered off (`btmgmt`), that sensor goes offline, comes back
        /// online through the other adapter, and commands to both still work.
        @Test func twoAdaptersInOneBridge() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)", "hr@\(Self.heart2)"], centrals: 2)
            defer { stack.stop() }
            let devices = RunEndToEndTests.heartControl + "\n" + RunEndToEndTests.heartControl
                .replacingOccurrences(of: "id: heart", with: "id: heart2").replacingOccurrences(of: Self.heart, with: Self.heart2)
            let config = stack.bridgeConfig(devices: devices, adapter: nil, bluetooth: "  adapters: [hci0, hci1]")

            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = ["heart": try await hub.subscribe("gatt2mqtt/heart/response"),
                             "heart2": try await hub.subscribe("gatt2mqtt/heart2/response")]
            let availability = ["heart": try await hub.subscribe("gatt2mqtt/heart/availability"),
                                "heart2": try await hub.subscribe("gatt2mqtt/heart2/availability")]
            try stack.startBridge(named: "bridge", config: config)
            for (id, subscription) in availability {
                try #require(await firstMessage(subscription) { $0 == #"{"state":"online"}"# } != nil,
                             "\(id) never online\n\(Self.logs(stack, "bridge"))")
            }
            /// Writes 01 to the control point of `id` and waits for its final response.
            func command(_ id: String, _ transaction: String) async throws -> String? {
                try await hub.publish(topic: "gatt2mqtt/\(id)/set", payload: RealStackTests.json(#"{"control":"01","transaction":"\#(transaction)"}"#),
                                      qos: .atLeastOnce)
                return await firstMessage(responses[id]!) { RealStackTests.isFinal($0, transaction) }?.payloadString
            }
            for id in ["heart", "heart2"] {
                let answer = try await command(id, "\(id)-1")
                #expect(answer?.contains(#""status":"ok""#) == true, "\(id): \(answer ?? "no answer")")
            }
            let peers = [try Self.peer(stack, Self.heart), try Self.peer(stack, Self.heart2)]
            print("real-stack: two adapters in one bridge: heart through \(peers[0] ?? "-"), heart2 through \(peers[1] ?? "-")")

            // Power off the adapter of heart: it goes offline, then online through the other one.
            let adapter = try #require(Self.central.first { $0.value == peers[0] }?.key, "heart is not connected: \(peers)")
            let other = adapter == "hci0" ? "hci1" : "hci0"
            let index = adapter == "hci0" ? 0 : 1
            let off = ContinuousClock.now
            try stack.btmgmt("power", "off", index: index)
            defer { _ = try? stack.btmgmt("power", "on", index: index) }
            #expect(await firstMessage(availability["heart"]!) { $0 == #"{"state":"offline"}"# } != nil, "no offline when \(adapter) went off")
            #expect(await firstMessage(availability["heart"]!) { $0 == #"{"state":"online"}"# } != nil,
                    "heart not online through \(other)\n\(Self.logs(stack, "bridge"))")
            RealStackFigures.record("two adapters in one bridge: adapter off to the device online through the other", ContinuousClock.now - off)
            #expect(try Self.peer(stack, Self.heart) == Self.central[other])
            for id in ["heart", "heart2"] {
                let answer = try await command(id, "\(id)-2")
                #expect(answer?.contains(#""status":"ok""#) == true, "\(id) after \(adapter) went off: \(answer ?? "no answer")")
            }
            #expect(try stack.writes(Self.heart, Self.controlPoint, value: "01") == 2, "one write per command")
            #expect(try stack.writes(Self.heart2, Self.controlPoint, value: "01") == 2, "one write per command")
            await hub.disconnect()
        }
    }
}
