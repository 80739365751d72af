import BinaryCoding
import BridgeConfig
import BridgeStore
import Foundation
import Synchronization
import TestSupport
import Testing
@testable import BridgeCore

/// The whole core over fakes: exact topics, payloads, QoS and retain.
@Suite struct BridgeTests {
    struct Harness {
        let mqtt = FakeMQTT()
        let device = FakeDevice()
        let store: BridgeStore
        let bridge: Bridge
        /// The bridge's clock when the test moves time itself.
        let clock: ManualClock?

        init(policy: OfflinePolicy = .queue, deadline: Duration = .seconds(60), timeout: Duration = .seconds(5),
             present: Bool = true, startsWrites: Bool = false, store: BridgeStore? = nil, clock: ManualClock? = nil,
             loop: SessionLoop? = nil,
             mappings: [CharacteristicMapping] = [CharacteristicMapping(uuid: "FFF2", codec: .raw, directions: [.notify], topic: "reading")]) throws {
            var config = Configuration()
            config.mqtt.reconnectMin = .milliseconds(20)
            config.mqtt.reconnectMax = .milliseconds(40)
            var d = DeviceConfig(id: "dev", profile: .custom)
            d.address = "C0:FF:EE:00:00:09"
            d.offlinePolicy = policy
            d.offlineDeadline = deadline
            d.commandTimeout = timeout
            d.characteristics = mappings
            config.devices = [d]
            device.setPresent(present)
            device.setStartingWrites(startsWrites)
            self.store = try store ?? BridgeStore.inMemory()
            self.clock = clock
            bridge = try Bridge(configuration: config, store: self.store, mqtt: mqtt,
                                central: FakeCentral(["C0:FF:EE:00:00:09": device]),
                                drivers: { _ in TestDriver() }, tick: Self.tick, clock: clock?.bridgeClock, loop: loop)
        }

        static let tick: Duration = .milliseconds(10)

        var session: DeviceSession { bridge.session("dev")! }

        /// Moves the manual clock by `d` and returns once the session handled a tick at the new
        /// instant (the bridge's ticker wakes by the same clock, a tick after its last one).
        func advance(by d: Duration) async throws {
            try #require(clock).advance(by: d)
            session.tick()
            await session.settled()
        }

        func set(_ json: String, retain: Bool = false, responseTopic: String? = nil, correlation: [UInt8]? = nil) {
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(json.utf8), retain: retain,
                                         responseTopic: responseTopic, correlationData: correlation))
        }

        func responses(_ n: Int) async throws -> [JSONValue] {
            try await mqtt.wait(for: "gatt2mqtt/dev/response", count: n).map { try JSONValue(parsing: $0.payload) }
        }

        /// Waits until a response satisfying `predicate` was published; returns all responses so far.
        func responses(until predicate: @escaping (JSONValue) -> Bool) async throws -> [JSONValue] {
            for n in 1...20 {
                let r = try await responses(n)
                if r.contains(where: predicate) { return r }
            }
            return try await responses(21)
        }

        /// Runs the bridge for the duration of `body`, then stops it.
        func running(_ body: () async throws -> Void) async throws { try await bridge.running(body) }
    }

    @Test func announcesBridgeAndAvailability() async throws {
        let h = try Harness()
        try await h.running {
            let state = try await h.mqtt.wait(for: "gatt2mqtt/bridge/state")
            #expect(state[0] == OutboundMessage(topic: "gatt2mqtt/bridge/state", payload: Array(#"{"state":"online"}"#.utf8), qos: 1, retain: true))
            let avail = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            #expect(avail[0].text == #"{"state":"online"}"# && avail[0].qos == 1 && avail[0].retain)
            let devices = try await h.mqtt.wait(for: "gatt2mqtt/bridge/devices")
            #expect(devices[0].text == #"[{"id":"dev","address":"C0:FF:EE:00:00:09","profile":"custom","source":"file","paired":false,"topics":["reading"],"#
                    + #""friendly_name":"dev","definition":{"model":"GATT device (layouts)","vendor":"Bluetooth LE","description":"custom (gatt2mqtt profile)","exposes":[]}}]"#
                    && devices[0].retain, "\(devices[0].text)")
        }
        #expect(h.mqtt.messages("gatt2mqtt/bridge/state").last?.text == #"{"state":"offline"}"#)
    }

    /// With commits batched per event-loop turn (as `gatt2mqtt run` does), a graceful stop hands
    /// `offline` to the MQTT port before `run()` returns, even with answers' writes staged. Held
    /// behind them, it went out only at the loop's next commit — which could come after the MQTT
    /// client had disconnected cleanly (so no Will either): the retained state stayed `online`.
    /// Here no loop commits, so a held `offline` is never sent at all.
    @Test func aStopPublishesOfflineEvenWithWritesStaged() async throws {
        let mqtt = FakeMQTT()
        var config = Configuration()
        var d = DeviceConfig(id: "dev", profile: .custom)
        d.address = "C0:FF:EE:00:00:09"
        config.devices = [d]
        let store = try BridgeStore.inMemory()
        let bridge = try Bridge(configuration: config, store: store, mqtt: mqtt, central: FakeCentral(["C0:FF:EE:00:00:09": FakeDevice()]),
                                drivers: { _ in TestDriver() }, tick: .milliseconds(10), batchCommits: true)
        try await bridge.running {
            _ = try await mqtt.wait(for: "gatt2mqtt/bridge/state")
            // Another device's row, which the running session's own writes cannot replace.
            bridge.batch.stage([.saveState(deviceID: "held", json: #"{"a":1}"#, at: 1)])
            bridge.batch.send(OutboundMessage(topic: "gatt2mqtt/held", payload: Array(#"{"a":1}"#.utf8), qos: 1, retain: true))
        }
        let topics = mqtt.sent.map(\.topic)
        #expect(mqtt.messages("gatt2mqtt/bridge/state").last?.text == #"{"state":"offline"}"#)
        #expect(try store.states()["held"] == ["a": 1], "the staged write committed")
        let held = try #require(topics.lastIndex(of: "gatt2mqtt/held")), offline = try #require(topics.lastIndex(of: "gatt2mqtt/bridge/state"))
        #expect(held < offline, "what was held went out first, in order")
    }

    /// Both ways a link takes an operation's writes: awaited by the session's writer task, or
    /// started with a completion (`BLELink.startWrites`, as BlueZ's links do).
    @Test(arguments: [false, true]) func commandToReadyDeviceAnswersOkOnly(startsWrites: Bool) async throws {
        let h = try Harness(startsWrites: startsWrites)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":7,"transaction":"t1"}"#)
            let r = try await h.responses(1)
            #expect(r == [["transaction": "t1", "status": "ok", "command": ["command": "ping", "value": 7], "data": ["echo": 7]]])
            // The state at link up (when it was last seen), then with the answer.
            let state = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 2)
            #expect(state.allSatisfy { $0.retain && $0.qos == 1 })
            #expect(try withoutLastSeen(state[1]) == ["last_ping": 7])
            #expect(h.device.writes == [[1, 7]])
            #expect(try h.store.pendingCommands().isEmpty)
            #expect(try h.store.states()["dev"].map(JSONValue.object) == JSONValue(parsing: state[1].payload))
            #expect(h.device.state.withLock { $0.startedWrites } == (startsWrites ? 1 : 0))
        }
    }

    /// An answer's writes are in SQLite before anything about them is published: the command's
    /// outbox entry is gone when its `ok` goes out, and the retained state sent is the state
    /// stored (the bridge republishes retained state from SQLite at start). Both paths: an
    /// answer by notification, and a read.
    /// The device's answer may come before BlueZ returns the write (the notification is direct,
    /// the method return goes through the bus): the command ends `ok` at once, and the next
    /// command still waits until the write returned — one GATT operation in flight per device.
    @Test(arguments: [false, true]) func answerBeforeTheWriteReturnsEndsTheCommandButNotTheOperation(startsWrites: Bool) async throws {
        let h = try Harness(startsWrites: startsWrites)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.device.setHoldingWrites(true)
            h.set(#"{"command":"ping","value":5,"transaction":"a"}"#)
            h.set(#"{"command":"ping","value":6,"transaction":"b"}"#)
            let first = try await h.responses(1)
            #expect(first[0]["transaction"] == "a")
            #expect(first[0]["status"] == "ok")
            // The answer may be published before the fake device starts holding the write's return.
            #expect(await eventually { h.device.heldWrites == 1 })
            // Both commands were taken (and dispatched if they could be): ping 6 still waits
            // for the write of ping 5 to return.
            await h.session.settled()
            #expect(await h.session.health()["queue"] == 1)
            #expect(h.device.writes == [[1, 5]])
            h.device.releaseWrites()
            let both = try await h.responses(2)
            #expect(both[1]["transaction"] == "b")
            #expect(both[1]["status"] == "ok")
            #expect(h.device.writes == [[1, 5], [1, 6]])
            #expect(h.device.state.withLock { $0.startedWrites } == (startsWrites ? 2 : 0))
        }
    }

    @Test func answerIsStoredBeforeItIsPublished() async throws {
        let h = try Harness()
        struct Seen: Sendable { var topic: String; var payload: JSONValue?; var pending: Int; var stored: JSONObject? }
        let seen = Mutex<[Seen]>([])
        let store = h.store
        h.mqtt.onSend.withLock {
            $0 = { m in
                guard m.topic == "gatt2mqtt/dev/response" || m.topic == "gatt2mqtt/dev" else { return }
                let pending = (try? store.pendingCommands().count) ?? -1
                let stored = (try? store.states())?["dev"]
                seen.withLock { $0.append(Seen(topic: m.topic, payload: try? JSONValue(parsing: m.payload), pending: pending, stored: stored)) }
            }
        }
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":7,"transaction":"t1"}"#)
            _ = try await h.responses(1)
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 2)
            h.bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/get", payload: Array(#"{"battery":"","transaction":"g1"}"#.utf8)))
            let got = try await h.responses(2)
            #expect(got.last?["transaction"] == "g1", "a /get echoes its transaction (and does not read an attribute \"transaction\")")
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 3)
        }
        let all = seen.withLock { $0 }
        let oks = all.filter { $0.topic == "gatt2mqtt/dev/response" && $0.payload?["status"] == "ok" }
        let states = all.filter { $0.topic == "gatt2mqtt/dev" }
        #expect(oks.count == 2 && oks.allSatisfy { $0.pending == 0 })
        #expect(states.count == 3)  // link up (last_seen), the ping's answer, the read
        for s in states { #expect(s.stored.map(JSONValue.object) == s.payload) }
        var last = states.last?.stored
        last?["last_seen"] = nil
        #expect(last == ["last_ping": 7, "battery": 42])
    }

    @Test func offlineCommandIsQueuedThenDelivered() async throws {
        let h = try Harness(present: false)
        try await h.running {
            h.set(#"{"command":"ping","value":1,"transaction":"q"}"#)
            let queued = try await h.responses(1)
            #expect(queued[0]["status"] == "queued" && queued[0]["transaction"] == "q")
            #expect(try h.store.pendingCommands().count == 1)
            h.device.setPresent(true)
            let all = try await h.responses(3)
            #expect(all.map { $0["status"] } == ["queued", "sent", "ok"])
            #expect(h.device.writes == [[1, 1]])
        }
    }

    /// A command expires exactly at its deadline on the bridge's clock: not a tick before.
    @Test func deadlinePassedEndsExpired() async throws {
        let h = try Harness(deadline: .milliseconds(100), present: false, clock: ManualClock())
        try await h.running {
            h.set(#"{"command":"ping","value":1}"#)
            _ = try await h.responses(1)
            try await h.advance(by: .milliseconds(99))
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").count == 1, "still queued 1 ms before its deadline")
            #expect(try h.store.pendingCommands().count == 1)
            try await h.advance(by: .milliseconds(1))
            let r = try await h.responses(2)
            #expect(r.map { $0["status"] } == ["queued", "expired"])
            #expect(try h.store.pendingCommands().isEmpty)
        }
    }

    /// `offline.deadline: 1500ms` means 1.5 s, not 1 s (the sub-second part was dropped).
    @Test func subSecondDeadlineIsKept() throws {
        let h = try Harness(deadline: .milliseconds(1500), present: false)
        let session = try #require(h.bridge.session("dev"))
        let before = h.bridge.clock.now()
        let cmd = h.bridge.pending(.command(["command": "ping"]), nil, InboundMessage(topic: "gatt2mqtt/dev/set", payload: []), session)
        let wait = try #require(cmd.deadline) - before
        #expect(wait >= .milliseconds(1500) && wait < .milliseconds(2500), "deadline in \(wait)")
        #expect(Duration.milliseconds(500).seconds == 0.5)
        #expect(Duration.seconds(60).seconds == 60)
    }

    @Test func rejectPolicyAnswersAtOnce() async throws {
        let h = try Harness(policy: .reject, present: false)
        try await h.running {
            h.set(#"{"command":"ping","value":1}"#)
            let r = try await h.responses(1)
            #expect(r[0]["status"] == "error" && r[0]["error"]?["code"] == "device_offline")
        }
    }

    @Test func latestWinsSupersedesOlderSameAttribute() async throws {
        let h = try Harness(policy: .latest, present: false)
        try await h.running {
            h.set(#"{"command":"set_level","value":1,"transaction":"a"}"#)
            h.set(#"{"command":"set_level","value":2,"transaction":"b"}"#)
            let r = try await h.responses(3)
            #expect(r[0]["status"] == "queued" && r[0]["transaction"] == "a")
            #expect(r.contains { $0["transaction"] == "a" && $0["error"]?["code"] == "superseded" })
            h.device.setPresent(true)
            _ = try await h.responses(5)
            #expect(h.device.writes == [[3, 2]])
        }
    }

    @Test func badInputGetsErrorsAndBridgeKeepsWorking() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set("{not json")
            h.set(#"{"command":"explode","value":1}"#)
            h.set(#"{"command":"ping","value":999}"#)
            h.bridge.handle(InboundMessage(topic: "gatt2mqtt/ghost/set", payload: Array(#"{"command":"ping"}"#.utf8)))
            h.device.notify([0xde, 0xad, 0xbe, 0xef])
            h.set(#"{"command":"ping","value":3}"#)
            let r = try await h.responses(4)
            #expect(r[0]["error"]?["code"] == "invalid_json")
            #expect(r[1]["error"]?["code"] == "unknown_command")
            #expect(r[2]["error"]?["code"] == "invalid_value")
            #expect(r[3]["status"] == "ok")
            let events = h.mqtt.messages("gatt2mqtt/bridge/event").map(\.text)
            #expect(events.contains { $0.contains("no device 'ghost'") })
            #expect(events.contains { $0.contains("deadbeef") })
            #expect(h.mqtt.messages("gatt2mqtt/ghost/response").isEmpty)
        }
    }

    @Test func retainedSetIsIgnored() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":1}"#, retain: true)
            h.set(#"{"command":"ping","value":2}"#)
            _ = try await h.responses(1)
            #expect(h.device.writes == [[1, 2]])
        }
    }

    /// A retained `/get` would read the device at every start, for nobody: ignored like `/set`.
    @Test func retainedGetIsIgnored() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/get", payload: Array(#"{"reading":""}"#.utf8), retain: true))
            h.set(#"{"command":"ping","value":2}"#)
            let r = try await h.responses(1)
            #expect(r[0]["command"]?["command"] == "ping", "\(r.map(\.jsonText))")
            await h.session.settled()
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").count == 1)
        }
    }

    @Test func mqtt5ResponseTopicAndCorrelationData() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":5}"#, responseTopic: "app/replies", correlation: [9, 9])
            let r = try await h.mqtt.wait(for: "app/replies")
            #expect(r[0].correlationData == [9, 9] && r[0].qos == 1 && !r[0].retain)
            #expect(try JSONValue(parsing: r[0].payload)["status"] == "ok")
        }
    }

    /// The answer may take the command timeout, on the bridge's clock, and not a tick more.
    @Test func silentDeviceTimesOut() async throws {
        let h = try Harness(timeout: .milliseconds(100), clock: ManualClock())
        h.device.setAnswering(false)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":5}"#)
            #expect(await h.device.writeLog.wait(timeout: .seconds(20)) { !$0.isEmpty } != nil)
            try await h.advance(by: .milliseconds(99))
            #expect(h.mqtt.messages("gatt2mqtt/dev/response").isEmpty, "no timeout 1 ms before the limit")
            try await h.advance(by: .milliseconds(1))
            let r = try await h.responses(1)
            #expect(r[0]["status"] == "error" && r[0]["error"]?["code"] == "timeout")
            #expect(r[0]["error"]?["message"] == "no answer from dev within 0.1 seconds")
        }
    }

    @Test func linkDropMidCommandIsInterruptedThenRecovers() async throws {
        let h = try Harness()
        h.device.setAnswering(false)
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            h.set(#"{"command":"ping","value":5}"#)
            #expect(await h.device.writeLog.wait(timeout: .seconds(20)) { !$0.isEmpty } != nil)
            h.device.dropLink()
            let r = try await h.responses(1)
            #expect(r[0]["error"]?["code"] == "interrupted")
            let avail = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability", count: 3)
            #expect(avail.map(\.text) == [#"{"state":"online"}"#, #"{"state":"offline"}"#, #"{"state":"online"}"#])
            h.device.setAnswering(true)
            h.set(#"{"command":"ping","value":6}"#)
            let r2 = try await h.responses(2)
            #expect(r2[1]["status"] == "ok")
            #expect(h.device.writes == [[1, 5], [1, 6]], "the interrupted command is not written again")
        }
    }

    @Test func statePushesMergeAndGetReads() async throws {
        let h = try Harness()
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev")  // link up: last_seen
            h.device.notify([2, 84])
            let s = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 2)
            #expect(try withoutLastSeen(s[1]) == ["battery": 84])
            h.bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/get", payload: Array(#"{"battery":""}"#.utf8)))
            let r = try await h.responses(1)
            #expect(r[0]["status"] == "ok" && r[0]["data"] == ["battery": 42])
            let s2 = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 3)
            #expect(try withoutLastSeen(s2[2]) == ["battery": 42])
        }
    }

    /// Every state the session publishes says when the device was last heard (`last_seen`,
    /// ISO 8601 UTC); so does the state published at link up.
    @Test func publishedStatesCarryLastSeen() async throws {
        let h = try Harness()
        let start = Date()
        try await h.running {
            let up = try await h.mqtt.wait(for: "gatt2mqtt/dev")
            let upState = try JSONValue(parsing: up[0].payload)
            #expect(upState.objectValue?.keys == ["last_seen"] && up[0].retain)
            h.device.notify([2, 84])
            let s = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 2)
            let text = try #require(try JSONValue(parsing: s[1].payload)["last_seen"]?.stringValue)
            #expect(text.hasSuffix("Z") && text.count == 20, "\(text)")
            let seen = try Date(text, strategy: Date.ISO8601FormatStyle())
            #expect(seen >= start.addingTimeInterval(-1) && seen <= Date().addingTimeInterval(1))
            #expect(try h.store.states()["dev"]?["last_seen"]?.stringValue == text)
        }
    }

    /// A sighting's RSSI reaches the state the first time and when it moved by 5 dBm or more
    /// since the published value; smaller moves cost no publish.
    @Test func observedRSSIIsPublishedOnFirstSightingAndOnChange() async throws {
        let h = try Harness(present: false)
        let session = try #require(h.bridge.session("dev"))
        try await h.running {
            session.observed(rssi: -70)
            let first = try await h.mqtt.wait(for: "gatt2mqtt/dev")
            #expect(try JSONValue(parsing: first[0].payload)["rssi"] == -70)
            session.observed(rssi: -73)
            session.observed(rssi: -66)
            session.observed(rssi: -65)
            let second = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 2)
            #expect(try JSONValue(parsing: second[1].payload)["rssi"] == -65)
            await session.settled()  // every sighting handled: none published since
            #expect(h.mqtt.messages("gatt2mqtt/dev").count == 2)
            #expect(try h.store.states()["dev"]?["rssi"] == -65)
        }
    }

    /// When the state's `hardware` first appears or changes, the device's Home Assistant
    /// configs go out again with it in their `device` block; the same value again does not.
    @Test func hardwareInfoRepublishesTheDevicesDiscovery() async throws {
        let h = try Harness()
        let topic = "homeassistant/sensor/gatt2mqtt_dev/reading/config"
        try await h.running {
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev/availability")
            let initial = try await h.mqtt.wait(for: topic)
            #expect(try JSONValue(parsing: initial[0].payload)["device"]?["serial_number"] == nil)
            h.device.notify([4, 1])
            let again = try await h.mqtt.wait(for: topic, count: 2)
            #expect(try JSONValue(parsing: again[1].payload)["device"]?["serial_number"] == "S1")
            h.device.notify([4, 1])
            h.device.notify([2, 50])
            _ = try await h.mqtt.wait(for: "gatt2mqtt/dev", count: 3)
            #expect(h.mqtt.messages(topic).count == 2, "unchanged hardware: no republish")
            h.device.notify([4, 2])
            let third = try await h.mqtt.wait(for: topic, count: 3)
            #expect(try JSONValue(parsing: third[2].payload)["device"]?["serial_number"] == "S2")
            // The bridge's own view, from the stored state, says the same.
            let stored = try #require(h.bridge.discoveryMessages(for: h.bridge.configuration.devices[0]).first { $0.topic == topic })
            #expect(try JSONValue(parsing: stored.payload)["device"]?["serial_number"] == "S2")
        }
    }

    @Test func outboxSurvivesRestartAtMostOnce() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-core-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("s.sqlite").path
        do {
            let store = try BridgeStore(path: path)
            let now = Date()
            try store.enqueue(OutboxEntry(deviceID: "dev", transaction: #""was-sent""#, command: #"{"command":"ping","value":1}"#,
                                          status: .sent, createdAt: now, deadline: now.addingTimeInterval(60)))
            try store.enqueue(OutboxEntry(deviceID: "dev", transaction: #""was-queued""#, command: #"{"command":"ping","value":2}"#,
                                          createdAt: now, deadline: now.addingTimeInterval(60)))
        }
        let h = try Harness(store: try BridgeStore(path: path))
        try await h.running {
            let r = try await h.responses(until: { $0["transaction"] == "was-queued" && $0["status"] == "ok" })
            #expect(r.contains { $0["transaction"] == "was-sent" && $0["error"]?["code"] == "interrupted" })
            #expect(r.contains { $0["transaction"] == "was-queued" && $0["status"] == "ok" })
            #expect(h.device.writes == [[1, 2]])
            #expect(try h.store.pendingCommands().isEmpty)
        }
    }

    @Test func homeAssistantRestartResendsDiscovery() async throws {
        let h = try Harness()
        #expect(h.bridge.subscriptions.contains("homeassistant/status"))
        try await h.running {
            let config = try await h.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_dev/reading/config")
            #expect(config[0].retain && config[0].qos == 1)
            // The device's three entities (its reading, RSSI, last seen) and the bridge device's
            // six, sent again on "online" only.
            _ = try await h.mqtt.wait("9 discovery messages") { $0.filter { $0.topic.hasPrefix("homeassistant/") }.count >= 9 }
            let before = h.mqtt.sent.filter { $0.topic.hasPrefix("homeassistant/") }.count
            h.bridge.handle(InboundMessage(topic: "homeassistant/status", payload: Array("offline".utf8)))
            h.bridge.handle(InboundMessage(topic: "homeassistant/status", payload: Array("online".utf8)))
            // Published in the order handled: "offline" would have resent its nine before these.
            _ = try await h.mqtt.wait("9 more discovery messages") { $0.filter { $0.topic.hasPrefix("homeassistant/") }.count >= 18 }
            await h.session.settled()
            let after = h.mqtt.sent.filter { $0.topic.hasPrefix("homeassistant/") }.count
            #expect(before == 9 && after == 18)
        }
    }

    /// A mapping removed from a device that stays: at the next start its Home Assistant entity is
    /// withdrawn (empty retained config), the kept one is not.
    @Test func removedMappingWithdrawsItsEntityAtTheNextStart() async throws {
        let store = try BridgeStore.inMemory()
        let reading = CharacteristicMapping(uuid: "FFF2", codec: .raw, directions: [.notify], topic: "reading")
        let level = CharacteristicMapping(uuid: "FFF3", codec: .raw, directions: [.read], topic: "level")
        let first = try Harness(store: store, mappings: [reading, level])
        try await first.running {
            _ = try await first.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_dev/level/config")
        }
        let second = try Harness(store: store, mappings: [reading])
        try await second.running {
            let withdrawn = try await second.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_dev/level/config")
            #expect(withdrawn[0].payload.isEmpty && withdrawn[0].retain)
            let kept = try await second.mqtt.wait(for: "homeassistant/sensor/gatt2mqtt_dev/reading/config")
            #expect(kept.allSatisfy { !$0.payload.isEmpty })
        }
        #expect(try store.discoveryTopics() == ["homeassistant/sensor/gatt2mqtt_dev/reading/config",
                                                 "homeassistant/sensor/gatt2mqtt_dev/rssi/config",
                                                 "homeassistant/sensor/gatt2mqtt_dev/last_seen/config",
                                                 "homeassistant/binary_sensor/gatt2mqtt_bridge/connection_state/config",
                                                 "homeassistant/sensor/gatt2mqtt_bridge/version/config",
                                                 "homeassistant/select/gatt2mqtt_bridge/log_level/config",
                                                 "homeassistant/button/gatt2mqtt_bridge/restart/config",
                                                 "homeassistant/switch/gatt2mqtt_bridge/scan/config",
                                                 "homeassistant/binary_sensor/gatt2mqtt_bridge/restart_required/config"])
    }

    /// A device that is away holds the adapter's connect gate for one bounded attempt only: the
    /// present device behind it still connects (found end-to-end: an away device's 30 s scan
    /// kept every other device offline).
    @Test func awayDeviceDoesNotHoldTheConnectGate() async throws {
        var config = Configuration()
        config.mqtt.reconnectMin = .milliseconds(50)
        config.mqtt.reconnectMax = .milliseconds(100)
        config.devices = [("away", "C0:FF:EE:00:00:0A"), ("here", "C0:FF:EE:00:00:0B")].map { id, a in
            var d = DeviceConfig(id: id, profile: .custom)
            d.address = a
            return d
        }
        let away = FakeDevice(), here = FakeDevice()
        away.setPresent(false)
        let central = FakeCentral(["C0:FF:EE:00:00:0A": away, "C0:FF:EE:00:00:0B": here], scanUntilTimeout: true)
        let mqtt = FakeMQTT()
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt, central: central,
                                drivers: { _ in TestDriver() }, connectAttempt: .milliseconds(300))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            defer { group.cancelAll() }
            // Whichever session takes the gate first, `here` is online within a couple of attempts.
            let online = try await mqtt.wait(for: "gatt2mqtt/here/availability")
            #expect(online.first?.text == #"{"state":"online"}"#)
            #expect(central.concurrency.withLock { $0.max } == 1, "connects stay serialised")
            #expect(mqtt.messages("gatt2mqtt/away/availability").allSatisfy { $0.text == #"{"state":"offline"}"# })
        }
    }

    @Test func connectsAreSerialisedPerAdapterAndEventsKept() async throws {
        var config = Configuration()
        let addresses = ["C0:FF:EE:00:00:0A", "C0:FF:EE:00:00:0B", "C0:FF:EE:00:00:0C"]
        config.devices = addresses.enumerated().map { i, a in
            var d = DeviceConfig(id: "d\(i)", profile: .custom)
            d.address = a
            return d
        }
        let devices = Dictionary(uniqueKeysWithValues: addresses.map { ($0, FakeDevice()) })
        let central = FakeCentral(devices, connectDelay: .milliseconds(30))
        let mqtt = FakeMQTT()
        let store = try BridgeStore.inMemory()
        let bridge = try Bridge(configuration: config, store: store, mqtt: mqtt, central: central, drivers: { _ in TestDriver() })
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            defer { group.cancelAll() }
            for i in 0..<3 { _ = try await mqtt.wait(for: "gatt2mqtt/d\(i)/availability") }
        }
        #expect(central.concurrency.withLock { $0.max } == 1)
        let events = try store.recentEvents(limit: 10)
        #expect(events.filter { $0.kind == "device_connected" }.count == 3)
        #expect(try store.devices().allSatisfy { $0.lastSeen != nil })
    }

    @Test func pollsReadOnConnectAndThenPeriodically() async throws {
        var config = Configuration()
        var d = DeviceConfig(id: "dev", profile: .custom)
        d.address = "C0:FF:EE:00:00:09"
        config.devices = [d]
        let device = FakeDevice()
        let mqtt = FakeMQTT()
        var driver = TestDriver()
        driver.polls = [(.milliseconds(50), DeviceRequest(writes: [], read: CharacteristicID("2A19")))]
        let clock = ManualClock()
        let tick = Duration.milliseconds(10)
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt,
                                central: FakeCentral(["C0:FF:EE:00:00:09": device]), drivers: { [driver] _ in driver },
                                tick: tick, clock: clock.bridgeClock)
        let session = try #require(bridge.session("dev"))
        /// Moves the clock; returns once the session handled a tick at the new instant.
        func advance(by d: Duration) async {
            clock.advance(by: d)
            session.tick()
            await session.settled()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            defer { group.cancelAll() }
            _ = try await mqtt.wait(for: "gatt2mqtt/dev/availability")
            // Due at the connect: the bridge's timer runs it at once, on no tick's grid.
            let state = try await mqtt.wait(for: "gatt2mqtt/dev", count: 2)  // link up, then the first read
            #expect(try withoutLastSeen(state[1]) == ["battery": 42])
            #expect(device.readLog.elements.count == 1)
            await advance(by: .milliseconds(49))
            // No poll at this tick: none read, and none under way (its read still to come).
            #expect(device.readLog.elements.count == 1, "not before the interval")
            #expect(await session.health()["in_flight"] == false)
            for n in 2...4 {
                await advance(by: n == 2 ? .milliseconds(1) : .milliseconds(50))
                #expect(await device.readLog.wait(timeout: .seconds(20)) { $0.count >= n } != nil, "read \(n)")
            }
            // The 4th read went out after the 3rd's value was handled (one operation at a time).
            #expect(mqtt.messages("gatt2mqtt/dev").count == 2, "unchanged values are not republished")
            #expect(mqtt.messages("gatt2mqtt/dev/response").isEmpty, "polls are internal: no lifecycle messages")
        }
    }

    @Test func healthCountsCommandsErrorsAndDevices() async throws {
        var config = Configuration()
        var d = DeviceConfig(id: "dev", profile: .custom)
        d.address = "C0:FF:EE:00:00:09"
        config.devices = [d]
        let device = FakeDevice()
        let mqtt = FakeMQTT()
        let bridge = try Bridge(configuration: config, store: try BridgeStore.inMemory(), mqtt: mqtt,
                                central: FakeCentral(["C0:FF:EE:00:00:09": device]), drivers: { _ in TestDriver() },
                                tick: .milliseconds(10), healthInterval: .milliseconds(100))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await bridge.run() }
            defer { group.cancelAll() }
            _ = try await mqtt.wait(for: "gatt2mqtt/dev/availability")
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array(#"{"command":"ping","value":1}"#.utf8)))
            bridge.handle(InboundMessage(topic: "gatt2mqtt/dev/set", payload: Array("nope".utf8)))
            _ = try await mqtt.wait(for: "gatt2mqtt/dev/response", count: 2)
            let before = mqtt.messages("gatt2mqtt/bridge/health").count
            let h = try await mqtt.wait(for: "gatt2mqtt/bridge/health", count: before + 1)
            let last = h[h.count - 1]
            #expect(last.qos == 0 && !last.retain)
            let j = try JSONValue(parsing: last.payload)
            #expect(j["commands"]?["ok"] == 1 && j["commands"]?["error"] == 1)
            #expect(j["errors"] == ["invalid_json": 1])
            #expect(j["notifications"] == 1)
            #expect(j["devices"]?["dev"]?["connected"] == true && j["devices"]?["dev"]?["queue"] == 0)
            #expect(j["uptime_s"]?.int64Value != nil && (j["rss_bytes"]?.int64Value ?? 0) > 0)
        }
    }
}

/// A published state without its `last_seen` (checked to be there).
func withoutLastSeen(_ m: OutboundMessage) throws -> JSONObject {
    var o = try #require(try JSONValue(parsing: m.payload).objectValue)
    #expect(o["last_seen"]?.stringValue != nil, "\(m.text)")
    o["last_seen"] = nil
    return o
}
