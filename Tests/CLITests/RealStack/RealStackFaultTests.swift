import Foundation
import Mosquitto
import Testing

/// Faults on Linux's own Bluetooth stack: the peripheral dropping the link or going away,
/// bluetoothd killed and restarted, the adapter powered off and on, a zero-length notification
/// (what an AcquireNotify socket's reader cannot tell from end-of-file), and the StartNotify
/// path. Each waits for the event it expects, with a deadline. Scenario table: docs/bluez.md,
/// "The real stack". Nested in `RealStackTests`, so it shares its `.serialized` (one VM, one
/// radio: never two stacks at once) and its condition.
extension RealStackTests {
    @Suite struct Faults {
        static let gopro = RealStackTests.gopro
        static let heart = RealStackTests.heart
        /// GP-0072, the GoPro's command characteristic.
        static let command = "b5f90072-aa8d-11e3-9046-0002a5d5c51b"
        /// set_shutter true as the bridge writes it (extended-13 header, as the SDK does).
        static let shutterOn = "2003010101"

        /// The peripheral drops the link, then goes away: the camera goes offline, a command sent
        /// meanwhile is `queued`, and when the camera is back it is delivered once (one shutter
        /// write at the device, one `ok`; every connect also writes Get Hardware Info there).
        @Test func linkLossThenAwayQueuesAndDeliversOnce() async throws {
            let stack = try RealStack(devices: ["gopro@\(Self.gopro)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = try await hub.subscribe("gatt2mqtt/camera/response")
            let availability = try await stack.startOnline("camera", devices: RealStackTests.cameraYAML, hub: hub)

            // The peripheral drops the link: offline, then online again by itself.
            let dropped = ContinuousClock.now
            try stack.control(#"{"op":"drop","address":"\#(Self.gopro)"}"#)
            #expect(await firstMessage(availability) { $0 == #"{"state":"offline"}"# } != nil, "no offline after the drop")
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil,
                    "not online again after the drop; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            RealStackFigures.record("reconnect after the peripheral dropped the link", ContinuousClock.now - dropped)

            // Away: offline; a command is queued, not written.
            try stack.control(#"{"op":"away","address":"\#(Self.gopro)","on":true}"#)
            #expect(await firstMessage(availability) { $0 == #"{"state":"offline"}"# } != nil, "no offline when away")
            let before = try stack.writes(Self.gopro, Self.command)
            #expect(try stack.writes(Self.gopro, Self.command, value: Self.shutterOn) == 0)
            try await hub.publish(topic: "gatt2mqtt/camera/set", payload: RealStackTests.json(#"{"command":"set_shutter","value":true,"transaction":"q1"}"#), qos: .atLeastOnce)
            let queued = await firstMessage(responses) { $0.contains(#""transaction":"q1""#) }
            #expect(queued?.payloadString.contains(#""status":"queued""#) == true, "\(queued?.payloadString ?? "no answer")")
            #expect(try stack.writes(Self.gopro, Self.command) == before)

            // Back: online, the command delivered once.
            try stack.control(#"{"op":"away","address":"\#(Self.gopro)","on":false}"#)
            let ok = await firstMessage(responses) { RealStackTests.isFinal($0, "q1") }
            #expect(ok?.payloadString.contains(#""status":"ok""#) == true, "\(ok?.payloadString ?? "no answer"); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(try stack.writes(Self.gopro, Self.command, value: Self.shutterOn) == 1,
                    "the queued command reached the camera more than once, or not at all")
            #expect(try stack.writes(Self.gopro, Self.command) == before + 2, "writes besides the shutter and Get Hardware Info")
            #expect(stack.pairCalls <= 1, "Pair calls: \(stack.pairCalls)")
            RealStackFigures.record("Pair calls over 3 connects of the GoPro", count: stack.pairCalls)
            await hub.disconnect()
        }

        /// bluetoothd killed (SIGKILL) and started again: the bridge sees `org.bluez` leave (offline)
        /// and come back, and reconnects by itself.
        @Test func bluetoothdKilledAndRestarted() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = try await hub.subscribe("gatt2mqtt/heart/response")
            let availability = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub)
            stack.killBluetoothd()
            #expect(await firstMessage(availability) { $0 == #"{"state":"offline"}"# } != nil, "no offline when bluetoothd died")
            let restarted = ContinuousClock.now
            try stack.startBluetoothd()
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil,
                    "not online after bluetoothd came back; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            RealStackFigures.record("bluetoothd restart to online", ContinuousClock.now - restarted)
            try await hub.publish(topic: "gatt2mqtt/heart/get", payload: RealStackTests.json(#"{"battery":"","transaction":"g1"}"#), qos: .atLeastOnce)
            let read = await firstMessage(responses) { RealStackTests.isFinal($0, "g1") }
            #expect(read?.payloadString.contains(#""battery_level":85"#) == true, "\(read?.payloadString ?? "no answer")")
            await hub.disconnect()
        }

        /// The adapter powered off and on behind the bridge's back (`btmgmt power off/on`).
        @Test func adapterPoweredOffAndOn() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
            let availability = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub)
            try stack.btmgmt("power", "off")
            #expect(await firstMessage(availability) { $0 == #"{"state":"offline"}"# } != nil, "no offline when the adapter went off")
            try stack.btmgmt("power", "on")
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil,
                    "not online after the adapter came back; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(await firstMessage(heartRate) { $0.contains(#""heart_rate":"#) } != nil, "no notifications after power on")
            await hub.disconnect()
        }

        /// A zero-length notification reaches the AcquireNotify socket as a zero-length packet, which
        /// a reader cannot tell from end-of-file; the bridge must not go deaf: notifications keep
        /// arriving (after a re-subscribe or a reconnect).
        @Test func zeroLengthNotificationDoesNotDeafenTheBridge() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            _ = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub)
            let notified = try stack.peripheral(Self.heart)["notifications"] as? Int ?? 0
            try stack.control(#"{"op":"notify","address":"\#(Self.heart)","uuid":"2a37","value":""}"#)
            // Only notifications sent after the empty one count.
            try stack.waitFor("the empty notification to be sent", timeout: .seconds(10)) {
                ((try? stack.peripheral(Self.heart)["notifications"] as? Int) ?? 0) > notified
            }
            let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
            let after = await firstMessage(heartRate) { $0.contains(#""heart_rate":"#) }
            #expect(after != nil, "no heart-rate notification after the zero-length one; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            await hub.disconnect()
        }

        /// A half-open link: with a controller that reports connections with the legacy LE
        /// Connection Complete although the kernel unmasked the enhanced event (radio.py
        /// `--legacy-connection-complete`; Bumble's own controller, and some real ones), Linux 6.1
        /// cancels the connection it believes pending and then ignores local disconnects: a
        /// `Device1.Disconnect` leaves the kernel holding the LE link (the peripheral stays
        /// connected), and every `Connect` then fails "Input/output error" (bluetoothd: "Device or
        /// resource busy"). The bridge started on that state clears it by powering the adapter
        /// off and on, once, and brings the sensor online.
        @Test func halfOpenLinkAfterALocalDisconnectIsRecovered() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"], radioOptions: ["--legacy-connection-complete"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let availability = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub)
            #expect(stack.stopBridge() == 0)
            let path = "/org/bluez/hci0/dev_" + Self.heart.replacingOccurrences(of: ":", with: "_")
            _ = try? RealStack.gdbus(["--object-path", path, "--method", "org.bluez.Device1.Disconnect"])  // NotConnected if already half-open
            #expect((try stack.peripheral(Self.heart))["connected"] as? Bool == true, "the peripheral saw the local disconnect: no half-open link to recover")
            #expect(throws: (any Error).self, "Connect worked: no half-open link to recover") {
                try RealStack.gdbus(["--object-path", path, "--method", "org.bluez.Device1.Connect"])
            }
            let restarted = ContinuousClock.now
            try stack.startBridge(devices: RealStackTests.heartYAML)
            let online = await firstMessage(availability) { $0 == #"{"state":"online"}"# }
            #expect(online != nil, "not online after the half-open link; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(stack.bridgeLog.contains("powering hci0 off and on"), "no power cycle logged")
            RealStackFigures.record("bridge start to online through a half-open link (power cycle)", ContinuousClock.now - restarted)
            await hub.disconnect()
        }

        /// The StartNotify path (`bluetooth.notify: start`): values as PropertiesChanged(Value).
        @Test func startNotifyPath() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let heartRate = try await hub.subscribe("gatt2mqtt/heart/heart_rate")
            let responses = try await hub.subscribe("gatt2mqtt/heart/response")
            _ = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub, bluetooth: "  notify: start")
            #expect(await firstMessage(heartRate) { $0.contains(#""heart_rate":"#) } != nil, "no heart-rate notification over StartNotify")
            try await hub.publish(topic: "gatt2mqtt/heart/get", payload: RealStackTests.json(#"{"battery":"","transaction":"g1"}"#), qos: .atLeastOnce)
            let read = await firstMessage(responses) { RealStackTests.isFinal($0, "g1") }
            #expect(read?.payloadString.contains(#""battery_level":85"#) == true, "\(read?.payloadString ?? "no answer")")
            await hub.disconnect()
        }
    }
}
