import BinaryCoding
import BridgeConfig
@testable import BridgeCore
import BridgeStore
import TestSupport
import Testing

/// One node of several on a broker (docs/scale-out.md), the other nodes played by the test
/// through the retained cluster topics it hands the bridge.
@Suite(.timeLimit(.minutes(1))) struct ClusterBridgeTests {
    static let address = "C0:FF:EE:00:00:09"

    struct Node {
        let mqtt = FakeMQTT()
        let device = FakeDevice()
        let central: FakeAdapterCentral
        let bridge: Bridge

        init(_ node: String, rssi: Int? = -70, deadline: Duration = .seconds(60), homeAssistant: Bool = false,
             connectDelay: Duration = .zero, reportsLinks: Bool = false) throws {
            var config = Configuration()
            config.nodeID = node
            config.homeAssistant.enabled = homeAssistant
            config.cluster.enabled = true
            config.cluster.claimSettle = .milliseconds(50)
            config.cluster.seenInterval = .milliseconds(50)
            config.cluster.handoverAfter = .milliseconds(200)
            config.cluster.lostAfter = .seconds(5)
            config.mqtt.reconnectMin = .milliseconds(20)
            config.mqtt.reconnectMax = .milliseconds(40)
            var d = DeviceConfig(id: "dev", profile: .custom)
            d.address = ClusterBridgeTests.address
            d.offlineDeadline = deadline
            d.characteristics = [CharacteristicMapping(uuid: "FFF2", codec: .raw, directions: [.notify], topic: "reading")]
            config.devices = [d]
            let ads = rssi.map { [Advertisement(address: ClusterBridgeTests.address, rssi: $0)] } ?? []
            central = FakeAdapterCentral(FakeCentral([ClusterBridgeTests.address: device], connectDelay: connectDelay),
                                         advertisements: ads, repeatingEvery: .milliseconds(200), reportsLinks: reportsLinks)
            bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt,
                                central: central,
                                drivers: { _ in TestDriver() }, tick: .milliseconds(10))
        }

        func inject(_ topic: String, _ json: String) {
            bridge.handle(InboundMessage(topic: "gatt2mqtt/bridge/" + topic, payload: Array(json.utf8), retain: true))
        }

        func set(_ json: String) {
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(json.utf8)))
        }

        func claims(until predicate: @escaping @Sendable ([OutboundMessage]) -> Bool) async throws -> [String] {
            try await mqtt.wait(for: "gatt2mqtt/bridge/owners/dev", until: predicate).map(\.text)
        }

        func running(_ body: () async throws -> Void) async throws { try await bridge.running(body) }
    }

    @Test func anotherNodesDeviceIsLeftAloneUntilItsWillThenClaimed() async throws {
        let b = try Node("b")
        b.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
        b.inject("owners/dev", #"{"node":"a","epoch":1}"#)
        b.inject("nodes/a/seen", #"{"node":"a","devices":{"C0:FF:EE:00:00:09":{"rssi":-50,"age_ms":0,"connected":true}}}"#)
        try await b.running {
            let online = try await b.mqtt.wait(for: "gatt2mqtt/bridge/nodes/b/state")
            #expect(online[0].text == #"{"state":"online","node":"b"}"# && online[0].retain)
            // b reports what it sees, retained.
            let seen = try await b.mqtt.wait(for: "gatt2mqtt/bridge/nodes/b/seen", until: { $0.contains { $0.text.contains(#""rssi":-70"#) } })
            #expect(seen.last?.retain == true)
            // Garbage on a node state is ignored: a stays online, and b's own state is not taken
            // for its Will.
            b.inject("nodes/a/state", "garbage")
            b.inject("nodes/b/state", #"{"state":"sleepy"}"#)
            b.inject("nodes/a/seen", "{oops")
            #expect(b.bridge.cluster!.state.withLock { $0.view.online.contains("a") })
            #expect(b.bridge.cluster!.state.withLock { !$0.willSeen })
            #expect(b.bridge.cluster!.state.withLock { $0.view.sightings["a"]?[ClusterBridgeTests.address]?.rssi } == -50, "a's report stands")
            // a owns it: b neither executes nor answers (a does).
            b.set(#"{"command":"ping","value":1,"transaction":"t1"}"#)
            #expect(b.mqtt.messages("gatt2mqtt/dev/response").isEmpty)
            #expect(b.device.writes.isEmpty && b.device.state.withLock { $0.connects } == 0)
            // a's Will: b, the only node that sees it, claims it with the next epoch and runs it.
            b.inject("nodes/a/state", #"{"state":"offline","node":"a"}"#)
            let claims = try await b.claims { $0.contains { $0.text == #"{"node":"b","epoch":2}"# } }
            #expect(claims == [#"{"node":"b","epoch":2}"#])
            b.set(#"{"command":"ping","value":7,"transaction":"t2"}"#)
            let r = try await b.mqtt.wait(for: "gatt2mqtt/dev/response", until: { $0.contains { $0.text.contains(#""status":"ok""#) } })
            #expect(try JSONValue(parsing: r.last!.payload) == ["transaction": "t2", "status": "ok", "command": ["command": "ping", "value": 7],
                                                               "data": ["echo": 7], "node": "b"])
            #expect(b.device.writes == [[1, 7]], "t1 was a's, never executed here")
        }
    }

    /// Home Assistant discovery in a cluster (issue 22: every node published every device's):
    /// a device's config messages come from its owner only. b, while a owns the device, publishes
    /// the bridge device's configs and none of the device's, not at start nor at Home Assistant's
    /// `online`; once b claims it (a's Will), b publishes them, and again at the next `online`.
    @Test func onlyTheOwnerPublishesADevicesDiscovery() async throws {
        let b = try Node("b", homeAssistant: true)
        b.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
        b.inject("owners/dev", #"{"node":"a","epoch":1}"#)
        b.inject("nodes/a/seen", #"{"node":"a","devices":{"C0:FF:EE:00:00:09":{"rssi":-50,"age_ms":0,"connected":true}}}"#)
        let device = "homeassistant/sensor/gatt2mqtt_dev/reading/config"
        let bridgeConfig = "homeassistant/button/gatt2mqtt_bridge/restart/config"
        let homeAssistantOnline = { b.bridge.handle(InboundMessage(topic: "homeassistant/status", payload: Array("online".utf8))) }
        try await b.running {
            _ = try await b.mqtt.wait(for: bridgeConfig)
            homeAssistantOnline()
            _ = try await b.mqtt.wait(for: bridgeConfig, count: 2)
            // b's next report goes out after the "online" was handled (one publisher, in order):
            // had b published the device's configs, they would be before it.
            let reports = b.mqtt.messages("gatt2mqtt/bridge/nodes/b/seen").count
            _ = try await b.mqtt.wait(for: "gatt2mqtt/bridge/nodes/b/seen", count: reports + 1)
            #expect(b.mqtt.messages(device).isEmpty, "a owns the device: b publishes nothing of it")
            #expect(!b.mqtt.sent.contains { $0.topic.contains("/gatt2mqtt_dev/") })
            b.inject("nodes/a/state", #"{"state":"offline","node":"a"}"#)
            _ = try await b.claims { $0.contains { $0.text == #"{"node":"b","epoch":2}"# } }
            let configs = try await b.mqtt.wait(for: device)
            #expect(configs.count == 1 && configs[0].retain && !configs[0].payload.isEmpty)
            #expect(b.mqtt.messages("homeassistant/sensor/gatt2mqtt_dev/rssi/config").count == 1)
            homeAssistantOnline()
            _ = try await b.mqtt.wait(for: device, count: 2)
        }
    }

    /// Garbage numbers on the cluster topics (issue 20): a retained claim at Int64.max made the
    /// node trap on `epoch + 1` at every start, until the message was cleared; reports with
    /// numbers out of range are refused whole. Both are said and ignored; the node goes on.
    @Test func garbageNumbersOnTheClusterTopicsAreIgnored() async throws {
        let b = try Node("b")
        b.inject("owners/dev", #"{"node":null,"epoch":9223372036854775807}"#)
        b.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
        b.inject("nodes/a/seen", #"{"node":"a","devices":{"C0:FF:EE:00:00:09":{"rssi":-90,"age_ms":0,"connected":false}}}"#)
        #expect(b.bridge.cluster!.state.withLock { $0.view.claims["dev"] } == nil, "the claim is garbage")
        for report in [#"{"C0:FF:EE:00:00:09":{"rssi":9223372036854775807}}"#, #"{"C0:FF:EE:00:00:09":{"rssi":-10,"age_ms":9223372036854775807}}"#,
                       #"{"C0:FF:EE:00:00:09":{"rssi":-10,"age_ms":-1}}"#, #"{"C0:FF:EE:00:00:09":{"rssi":1e300}}"#] {
            b.inject("nodes/a/seen", #"{"node":"a","devices":"# + report + "}")
            #expect(b.bridge.cluster!.state.withLock { $0.view.sightings["a"]?[ClusterBridgeTests.address]?.rssi } == -90, "a's report stands: \(report)")
        }
        try await b.running {
            // b sees it best (-70 against a's -90) and claims it with the first epoch.
            let claims = try await b.claims { $0.contains { $0.text == #"{"node":"b","epoch":1}"# } }
            #expect(claims == [#"{"node":"b","epoch":1}"#])
            // The same garbage while running: ignored, b keeps it.
            b.inject("owners/dev", #"{"node":"a","epoch":9223372036854775807}"#)
            b.inject("owners/dev", #"{"node":"a","epoch":-1}"#)
            #expect(b.bridge.cluster!.state.withLock { $0.view.claims["dev"] } == OwnershipClaim(node: "b", epoch: 1))
            b.set(#"{"command":"ping","value":5,"transaction":"t5"}"#)
            let r = try await b.mqtt.wait(for: "gatt2mqtt/dev/response", until: { $0.contains { $0.text.contains(#""status":"ok""#) } })
            #expect(r.last?.text.contains(#""transaction":"t5""#) == true)
        }
    }

    @Test func aCompetingClaimOfTheSameEpochLosesToTheLowerNodeID() async throws {
        let b = try Node("b")
        try await b.running {
            _ = try await b.claims { $0.contains { $0.text == #"{"node":"b","epoch":1}"# } }
            _ = try await b.mqtt.wait(for: "gatt2mqtt/dev/availability", until: { $0.last?.text == #"{"state":"online"}"# })
            // c claimed at the same time and its claim arrived later: b's stands, and b makes
            // the retained one its own again.
            b.inject("nodes/c/state", #"{"state":"online","node":"c"}"#)
            b.inject("owners/dev", #"{"node":"c","epoch":1}"#)
            // (More than one of its own again when a stall of the loaded machine made b read the
            // claims again meanwhile: never another node's, never another epoch.)
            let again = try await b.claims { $0.count >= 2 }
            #expect(again.allSatisfy { $0 == #"{"node":"b","epoch":1}"# }, "\(again)")
            // b took two commands: t1 is written and waits for its answer, t2 waits behind it.
            b.device.setAnswering(false)
            b.set(#"{"command":"ping","value":1,"transaction":"t1"}"#)
            b.set(#"{"command":"ping","value":2,"transaction":"t2"}"#)
            #expect(await eventually(timeout: .seconds(10)) { b.device.writes.count == 1 })
            #expect(await eventually(timeout: .seconds(10)) { (try? b.bridge.store.pendingCommands(for: "dev").count) == 2 })
            // a's claim of the same epoch wins over b's: b gives the device up (link closed,
            // availability offline) and claims nothing.
            b.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
            b.inject("owners/dev", #"{"node":"a","epoch":1}"#)
            let availability = try await b.mqtt.wait(for: "gatt2mqtt/dev/availability", until: { $0.last?.text == #"{"state":"offline"}"# })
            #expect(availability.last?.retain == true)
            // a, claiming meanwhile, held both and executes them: b leaves t2 to it unanswered
            // and answers only t1, which it may have written (docs/scale-out.md, "Cold start").
            let t1 = try await b.mqtt.wait(for: "gatt2mqtt/dev/response", until: { $0.contains { $0.text.contains(#""transaction":"t1","status":"error""#) } })
            #expect(t1.last?.text.contains("after the command was written") == true, "\(t1.map(\.text))")
            #expect(await eventually(timeout: .seconds(10)) { (try? b.bridge.store.pendingCommands(for: "dev").isEmpty) == true })
            #expect(!b.mqtt.messages("gatt2mqtt/dev/response").contains { $0.text.contains(#""transaction":"t2","status":"error""#) },
                    "\(b.mqtt.messages("gatt2mqtt/dev/response").map(\.text))")
            // The link closes right after (the session publishes offline, then disconnects).
            #expect(await eventually(timeout: .seconds(10)) { b.device.state.withLock { $0.link } == nil })
            // b does not fight for it: a's claim stands in its view, and b never claimed a later
            // epoch (its re-assertions of epoch 1, before a's claim, are all it said).
            #expect(b.bridge.cluster!.state.withLock { $0.view.claims["dev"] } == OwnershipClaim(node: "a", epoch: 1))
            let said = b.mqtt.messages("gatt2mqtt/bridge/owners/dev").map(\.text)
            #expect(said.allSatisfy { $0 == #"{"node":"b","epoch":1}"# }, "\(said)")
        }
    }

    /// b's claim loses to a's of the same epoch while b is still connecting (the real stack: a
    /// connect takes seconds). BlueZ shows the device connected meanwhile, but that link is b's
    /// own connect's to finish: the cluster does not close it as a leftover (on the real stack a
    /// second `Disconnect` sent then took bluetoothd down); b's session closes it itself when the
    /// connect returns.
    @Test func aLinkTheNodeIsStillConnectingIsNotClosedAsALeftover() async throws {
        let b = try Node("b", connectDelay: .seconds(5), reportsLinks: true)
        let central = b.central
        try await b.running {
            _ = try await b.claims { $0.contains { $0.text == #"{"node":"b","epoch":1}"# } }
            #expect(await eventually(timeout: .seconds(10)) { b.device.state.withLock { $0.connecting } })
            b.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
            b.inject("owners/dev", #"{"node":"a","epoch":1}"#)
            // The connect returns and b, no longer the owner, closes the link it got.
            #expect(await eventually(timeout: .seconds(20)) {
                b.device.state.withLock { !$0.connecting && $0.connects == 1 && $0.link == nil }
            })
            #expect(!central.log.calls.contains { $0.hasPrefix("close") }, "\(central.log.calls)")
        }
    }

    @Test func aHeldCommandPastItsDeadlineIsAnsweredOnceByTheLeader() async throws {
        // Nobody sees the device, so nobody claims it: the command is held, then expires.
        let a = try Node("a", rssi: nil, deadline: .milliseconds(100))
        a.inject("nodes/c/state", #"{"state":"online","node":"c"}"#)
        try await a.running {
            _ = try await a.mqtt.wait(for: "gatt2mqtt/bridge/nodes/a/state")
            a.set(#"{"command":"ping","value":3,"transaction":"t3"}"#)
            let r = try await a.mqtt.wait(for: "gatt2mqtt/dev/response")
            let body = try JSONValue(parsing: r[0].payload).objectValue
            #expect(body?["status"] == "expired" && body?["node"] == "a" && body?["transaction"] == "t3", "\(r[0].text)")
            #expect(a.device.writes.isEmpty)
        }
        // A node that is not the leader drops its copy without a word.
        let c = try Node("c", rssi: nil, deadline: .milliseconds(100))
        c.inject("nodes/a/state", #"{"state":"online","node":"a"}"#)
        try await c.running {
            c.set(#"{"command":"ping","value":3,"transaction":"t3"}"#)
            #expect(await eventually { c.bridge.cluster!.state.withLock { $0.held.isEmpty } })
            #expect(c.mqtt.messages("gatt2mqtt/dev/response").isEmpty)
        }
    }
}
