import Foundation
import Mosquitto
import Testing

/// The bridge API (`bridge/request/…`, docs/bridge-api.md) on Linux's own Bluetooth stack: a scan
/// as bluetoothd reports it, device/add with the profile guessed from it, device/remove with
/// forget, pair and unpair by request, and an add whose device is never found. The emulator's
/// version is `BridgeAPITests`; here the real bluetoothd judges. Nested in `RealStackTests`, so it
/// shares its `.serialized` (one VM, one radio) and its condition. Scenario table and figures:
/// docs/bluez.md, "The real stack".
extension RealStackTests {
    @Suite struct API {
        static let gopro = RealStackTests.gopro
        static let heart = RealStackTests.heart
        static let thermometer = "C0:FF:EE:00:00:04"
        /// An address no peripheral of the radio has.
        static let nobody = "C0:FF:EE:00:00:0F"

        static func request(_ hub: MQTTClient, _ responses: MQTTSubscription, _ action: String, _ body: String = "{}",
                            timeout: Duration = RealStack.slow) async throws -> [String: Any] {
            try await BridgeAPITests.request(hub, responses, action, body, timeout: timeout)
        }

        static func data(_ r: [String: Any]) -> [String: Any] { BridgeAPITests.data(r) }

        static func object(_ m: MQTTMessage) -> [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(m.payload)) as? [String: Any]) ?? [:]
        }

        /// `/org/bluez/hci0/dev_C0_FF_EE_00_00_04` for `C0:FF:EE:00:00:04` (on `adapter`).
        static func path(_ address: String, adapter: String = "hci0") -> String {
            "/org/bluez/\(adapter)/dev_" + address.replacingOccurrences(of: ":", with: "_")
        }

        /// bluetoothd's object tree (`GetManagedObjects` through gdbus, an independent client).
        static func bluezObjects() throws -> String {
            try RealStack.gdbus(["--object-path", "/", "--method", "org.freedesktop.DBus.ObjectManager.GetManagedObjects"])
        }

        /// Whether bluetoothd has an object for `address` (any interface).
        static func bluezKnows(_ address: String) throws -> Bool {
            try bluezObjects().contains("'\(path(address))'")
        }

        /// One `Device1` property of `address` (on `adapter`) as gdbus prints it (`(<true>,)`), nil
        /// when bluetoothd has no such device.
        static func deviceProperty(_ address: String, _ name: String, adapter: String = "hci0") -> String? {
            try? RealStack.gdbus(["--object-path", path(address, adapter: adapter), "--method", "org.freedesktop.DBus.Properties.Get",
                                  "org.bluez.Device1", name])
        }

        /// hci0's `Discovering`, as gdbus prints it.
        static func discovering() -> String? {
            try? RealStack.gdbus(["--object-path", "/org/bluez/hci0", "--method", "org.freedesktop.DBus.Properties.Get",
                                  "org.bluez.Adapter1", "Discovering"])
        }

        /// Scan → the thermometer and the camera seen as bluetoothd reports them, with the guesses →
        /// device/add of the thermometer without a profile (during the scan) → online, a read →
        /// device/remove without forget: the link goes, bluetoothd keeps the device (a device a client
        /// connected is no longer temporary) with its GATT services as UUIDs, which the next scan
        /// reports → added again from that sighting → device/remove with forget: bluetoothd drops
        /// the device object and the link, and the thermometer, advertising again, is seen by the
        /// next scan as a stranger with only what it advertises.
        @Test func scanAddUseAndRemoveWithForget() async throws {
            let stack = try RealStack(devices: ["thermo@\(Self.thermometer)", "gopro@\(Self.gopro)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
            let sightings = try await hub.subscribe("gatt2mqtt/bridge/scan")
            let events = try await hub.subscribe("gatt2mqtt/bridge/event")
            let state = try await hub.subscribe("gatt2mqtt/bridge/state")
            let availability = try await hub.subscribe("gatt2mqtt/porch/availability")
            try stack.startBridge(devices: "  []", logLevel: "debug")
            try #require(await firstMessage(state) { $0.contains("online") } != nil, "bridge never online; log:\n\(stack.bridgeLog.suffix(3000))")

            // Scan: the thermometer as bluetoothd reports it (name and 181A from the advertising
            // data and the scan response the kernel merges, RSSI from the controller).
            let scanRequested = ContinuousClock.now
            let started = try await Self.request(hub, responses, "scan", #"{"seconds":120}"#)
            #expect(started["status"] as? String == "ok" && Self.data(started)["scanning"] as? Bool == true, "\(started)")
            let porch = try #require(await firstMessage(sightings) { $0.contains(Self.thermometer) },
                                     "no sighting of the thermometer; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            RealStackFigures.record("scan request to first sighting (thermometer)", ContinuousClock.now - scanRequested)
            print("real-stack sighting: \(porch.payloadString)")
            var sighting = Self.object(porch)
            // The first report may come before the scan response (no name yet): wait for the full one.
            if sighting["name"] as? String != "Thermometer" {
                sighting = await firstMessage(sightings) { $0.contains(Self.thermometer) && $0.contains(#""name":"Thermometer""#) }
                    .map(Self.object) ?? sighting
            }
            #expect(sighting["name"] as? String == "Thermometer", "\(sighting)")
            #expect(sighting["rssi"] is Int, "\(sighting)")
            #expect((sighting["service_uuids"] as? [String])?.contains("181A") == true, "\(sighting)")
            #expect(sighting["profile_guess"] as? String == "environmental_sensing", "\(sighting)")
            #expect(sighting["configured"] as? Bool == false && sighting["connected"] as? Bool == false
                        && sighting["paired"] as? Bool == false, "\(sighting)")
            let camera = await firstMessage(sightings) { $0.contains(Self.gopro) && $0.contains(#""0x02F2":"#) }
            #expect(camera?.payloadString.contains(#""profile_guess":"gopro""#) == true, "\(camera?.payloadString ?? "no sighting of the camera with 0x02F2")")

            // Add without a profile, while the scan still runs: the scan's guess; connected.
            let temperature = try await hub.subscribe("gatt2mqtt/porch/temperature")
            let addRequested = ContinuousClock.now
            let added = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"\#(Self.thermometer)"}"#)
            try #require(added["status"] as? String == "ok", "\(added); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            RealStackFigures.record("device/add to ok (thermometer, during a scan)", ContinuousClock.now - addRequested)
            #expect(Self.data(added)["profile"] as? String == "environmental_sensing", "\(added)")
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil, "porch not online")
            #expect(await firstMessage(temperature) { $0.contains(#""temperature":"#) } != nil, "no temperature published")
            let porchResponses = try await hub.subscribe("gatt2mqtt/porch/response")
            try await hub.publish(topic: "gatt2mqtt/porch/get", payload: RealStackTests.json(#"{"temperature":"","transaction":"g1"}"#), qos: .atLeastOnce)
            let read = await firstMessage(porchResponses) { RealStackTests.isFinal($0, "g1") }
            #expect(read?.payloadString.contains(#""status":"ok""#) == true && read?.payloadString.contains(#""temperature":"#) == true,
                    "\(read?.payloadString ?? "no answer")")
            let stopped = try await Self.request(hub, responses, "scan", #"{"seconds":0}"#)
            #expect(Self.data(stopped)["scanning"] as? Bool == false, "\(stopped)")
            #expect(await firstMessage(events) { $0.contains(#""type":"scan_stopped""#) } != nil, "no scan_stopped event")

            // bluetoothd now lists the thermometer's GATT services (GAP and GATT included) as its UUIDs.
            let uuids = Self.deviceProperty(Self.thermometer, "UUIDs") ?? "no UUIDs"
            #expect(uuids.contains("00001800-") && uuids.contains("00001801-") && uuids.contains("0000180f-")
                        && uuids.contains("0000181a-"), "\(uuids)")

            // Remove without forget: the link goes; bluetoothd keeps the device with those UUIDs.
            let kept = try await Self.request(hub, responses, "device/remove", #"{"id":"porch"}"#)
            #expect(kept["status"] as? String == "ok" && Self.data(kept)["forgotten"] as? Bool == false, "\(kept)")
            try stack.waitFor("the thermometer to see its link go", timeout: .seconds(30)) {
                (try? stack.peripheral(Self.thermometer))?["connected"] as? Bool == false
            }
            #expect(try Self.bluezKnows(Self.thermometer), "bluetoothd dropped the device without forget")
            let known = try await hub.subscribe("gatt2mqtt/bridge/scan")
            _ = try await Self.request(hub, responses, "scan", #"{"seconds":60}"#)
            let seenAgain = await firstMessage(known) { $0.contains(Self.thermometer) }.map(Self.object) ?? [:]
            let services = Set(seenAgain["service_uuids"] as? [String] ?? [])
            #expect(seenAgain["configured"] as? Bool == false && services.isSuperset(of: ["1800", "1801", "180F", "181A"]), "\(seenAgain)")
            #expect(seenAgain["profile_guess"] as? String == "environmental_sensing", "\(seenAgain)")
            let readded = try await Self.request(hub, responses, "device/add", #"{"id":"porch","address":"\#(Self.thermometer)"}"#)
            try #require(readded["status"] as? String == "ok", "\(readded); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil, "porch not online again")
            _ = try await Self.request(hub, responses, "scan", #"{"seconds":0}"#)

            // Remove with forget: bluetoothd forgets the device and the peripheral sees the link go.
            let removed = try await Self.request(hub, responses, "device/remove", #"{"id":"porch","forget":true}"#)
            #expect(removed["status"] as? String == "ok" && Self.data(removed)["forgotten"] as? Bool == true,
                    "\(removed); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(try !Self.bluezKnows(Self.thermometer), "bluetoothd still has the device after forget")
            try stack.waitFor("the thermometer to see its link go", timeout: .seconds(30)) {
                (try? stack.peripheral(Self.thermometer))?["connected"] as? Bool == false
            }
            // Advertising again, and a stranger to the next scan (sightings from now on only).
            let later = try await hub.subscribe("gatt2mqtt/bridge/scan")
            let again = try await Self.request(hub, responses, "scan", #"{"seconds":60}"#)
            #expect(again["status"] as? String == "ok", "\(again)")
            let stranger = await firstMessage(later) { $0.contains(Self.thermometer) }
            #expect(stranger.map(Self.object)?["configured"] as? Bool == false
                        && stranger.map(Self.object)?["service_uuids"] as? [String] == ["181A"],
                    "\(stranger?.payloadString ?? "the thermometer was not seen again after forget")")
            _ = try await Self.request(hub, responses, "scan", #"{"seconds":0}"#)
            await hub.disconnect()
        }

        /// pair and unpair by request of a connected sensor the bridge never pairs by itself: Paired
        /// in bluetoothd and a bond at the peripheral; unpair removes the device (link and bond), and
        /// the bridge connects again, unpaired, and the sensor works.
        @Test func pairAndUnpairByRequest() async throws {
            let stack = try RealStack(devices: ["hr@\(Self.heart)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
            let events = try await hub.subscribe("gatt2mqtt/bridge/event")
            let devices = try await hub.subscribe("gatt2mqtt/bridge/devices")
            let heartResponses = try await hub.subscribe("gatt2mqtt/heart/response")
            let availability = try await stack.startOnline("heart", devices: RealStackTests.heartYAML, hub: hub, logLevel: "debug")
            #expect(Self.deviceProperty(Self.heart, "Paired") == "(<false>,)")

            let pairRequested = ContinuousClock.now
            let paired = try await Self.request(hub, responses, "pair", #"{"id":"heart"}"#)
            try #require(paired["status"] as? String == "ok" && Self.data(paired)["paired"] as? Bool == true,
                         "\(paired); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            RealStackFigures.record("pair request to ok (connected heart-rate sensor)", ContinuousClock.now - pairRequested)
            #expect(Self.deviceProperty(Self.heart, "Paired") == "(<true>,)")
            #expect((try stack.peripheral(Self.heart))["pairings"] as? Int == 1, "the sensor saw no pairing")
            #expect(await firstMessage(events) { $0.contains(#""type":"device_paired""#) } != nil, "no device_paired event")
            #expect(await firstMessage(devices) { $0.contains(#""paired":true"#) } != nil, "bridge/devices does not say paired")
            #expect(stack.pairCalls == 1, "Pair calls: \(stack.pairCalls)")

            // Unpair: the device goes from bluetoothd (link and bond), the bridge connects again.
            let unpaired = try await Self.request(hub, responses, "unpair", #"{"id":"heart"}"#)
            #expect(unpaired["status"] as? String == "ok" && Self.data(unpaired)["paired"] as? Bool == false,
                    "\(unpaired); bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(await firstMessage(events) { $0.contains(#""type":"device_unpaired""#) } != nil, "no device_unpaired event")
            #expect(await firstMessage(devices) { $0.contains(#""paired":false"#) } != nil, "bridge/devices still says paired")
            #expect(stack.file(stack.bluetoothdLog).contains("Removing device \(Self.path(Self.heart))"), "bluetoothd did not remove the device")
            #expect(await firstMessage(availability) { $0 == #"{"state":"offline"}"# } != nil, "no offline after unpair")
            #expect(await firstMessage(availability) { $0 == #"{"state":"online"}"# } != nil,
                    "not online again after unpair; bridge log:\n\(stack.bridgeLog.suffix(3000))")
            #expect(Self.deviceProperty(Self.heart, "Paired") == "(<false>,)", "paired again after unpair")
            #expect(stack.pairCalls == 1, "the bridge paired the sensor again: \(stack.pairCalls) Pair calls")
            try await hub.publish(topic: "gatt2mqtt/heart/get", payload: RealStackTests.json(#"{"battery":"","transaction":"g1"}"#), qos: .atLeastOnce)
            let read = await firstMessage(heartResponses) { RealStackTests.isFinal($0, "g1") }
            #expect(read?.payloadString.contains(#""battery_level":85"#) == true, "\(read?.payloadString ?? "no answer")")
            await hub.disconnect()
        }

        /// device/add of an address no peripheral has: an error after its timeout, nothing added,
        /// and the look-up's discovery ends (bluetoothd stops discovering, knows no such device).
        @Test func addOfADeviceNeverFound() async throws {
            let stack = try RealStack(devices: ["thermo@\(Self.thermometer)"])
            defer { stack.stop() }
            let hub = try await stack.broker.client(loop: stack.loop)
            let responses = try await hub.subscribe("gatt2mqtt/bridge/response/#")
            let state = try await hub.subscribe("gatt2mqtt/bridge/state")
            try stack.startBridge(devices: "  []")
            try #require(await firstMessage(state) { $0.contains("online") } != nil, "bridge never online; log:\n\(stack.bridgeLog.suffix(3000))")
            let added = try await Self.request(hub, responses, "device/add",
                                               #"{"id":"ghost","address":"\#(Self.nobody)","profile":"heart_rate","timeout":5}"#)
            #expect(added["status"] as? String == "error", "\(added)")
            let error = added["error"] as? String ?? ""
            #expect(error.contains("\(Self.nobody) was not connected within 5 s") && error.contains("nothing was added"), "\(added)")
            let info = Self.data(try await Self.request(hub, responses, "info"))
            #expect(info["devices"] as? Int == 0, "\(info)")
            let list = try await Self.request(hub, responses, "devices")
            #expect((list["data"] as? [Any])?.isEmpty == true, "\(list)")
            try stack.waitFor("hci0 to stop discovering", timeout: .seconds(30)) { Self.discovering() == "(<false>,)" }
            #expect(try !Self.bluezKnows(Self.nobody))
            await hub.disconnect()
        }
    }
}
