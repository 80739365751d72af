import BinaryCoding
import BridgeConfig
import BridgeCore
import BridgeStore
import Foundation
import Synchronization

/// Records every message the bridge sends.
final class FakeMQTT: MQTTPort {
    let sent = Mutex<[OutboundMessage]>([])
    /// Called with each message as it is sent, before it is recorded (to look at the store then).
    let onSend = Mutex<(@Sendable (OutboundMessage) -> Void)?>(nil)
    func send(_ message: OutboundMessage) {
        onSend.withLock { $0 }?(message)
        sent.withLock { $0.append(message) }
    }

    func messages(_ topic: String) -> [OutboundMessage] { sent.withLock { $0.filter { $0.topic == topic } } }

    /// Waits (up to 3 s) until `count` messages on `topic` exist; returns them.
    func wait(for topic: String, count: Int = 1, timeout: Duration = .seconds(3)) async throws -> [OutboundMessage] {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let m = messages(topic)
            if m.count >= count { return m }
            try await Task.sleep(for: .milliseconds(5))
        }
        struct Timeout: Error, CustomStringConvertible { let description: String }
        throw Timeout(description: "waited for \(count) message(s) on \(topic); have: \(sent.withLock { $0.map { "\($0.topic) \($0.text)" } })")
    }
}

/// A scripted device behind a fake central: answers writes by notifying, can be away, can drop.
final class FakeDevice: Sendable {
    struct State {
        var present = true; var link: FakeLink?; var writes: [[UInt8]] = []; var answer = true; var connects = 0; var reads = 0
        /// Writes answer at once but BlueZ's return of the write is held until `releaseWrites()`.
        var holdWrites = false
        var held: [CheckedContinuation<Void, Never>] = []
    }
    let state = Mutex(State())

    var writes: [[UInt8]] { state.withLock { $0.writes } }
    func setPresent(_ on: Bool) { state.withLock { $0.present = on } }
    func setAnswering(_ on: Bool) { state.withLock { $0.answer = on } }
    func setHoldingWrites(_ on: Bool) { state.withLock { $0.holdWrites = on } }
    var heldWrites: Int { state.withLock { $0.held.count } }
    /// Returns every held write (and stops holding new ones).
    func releaseWrites() {
        let held = state.withLock { s in
            s.holdWrites = false
            defer { s.held = [] }
            return s.held
        }
        for c in held { c.resume() }
    }
    /// Drops the link now (as a link loss).
    func dropLink() { state.withLock { s in s.link?.continuation.finish(); s.link = nil } }
    func notify(_ value: [UInt8], on uuid: String = "FFF2") {
        let link = state.withLock { $0.link }
        link?.continuation.yield(GATTNotification(characteristic: CharacteristicID(uuid), value: value))
    }
}

final class FakeLink: BLELink {
    let notifications: AsyncStream<GATTNotification>
    let continuation: AsyncStream<GATTNotification>.Continuation
    let device: FakeDevice
    let mtu = 185

    init(device: FakeDevice) {
        self.device = device
        (notifications, continuation) = AsyncStream.makeStream(of: GATTNotification.self)
    }

    func write(_ value: [UInt8], to characteristic: CharacteristicID, withResponse: Bool) async throws(BLEError) {
        let (connected, answer) = device.state.withLock { s in (s.link === self, s.answer) }
        guard connected else { throw BLEError(.notConnected, "Not connected") }
        device.state.withLock { $0.writes.append(value) }
        // The scripted device: [1, x] → notifies [1, x] (the answer) on FFF2.
        if answer, value.first == 1, value.count == 2 { continuation.yield(GATTNotification(characteristic: CharacteristicID("FFF2"), value: value)) }
        if device.state.withLock({ $0.holdWrites }) {
            await withCheckedContinuation { c in device.state.withLock { $0.held.append(c) } }
        }
    }

    func read(_ characteristic: CharacteristicID) async throws(BLEError) -> [UInt8] {
        device.state.withLock { $0.reads += 1 }
        return [42]
    }
    func disconnect() async { continuation.finish() }
}

final class FakeCentral: BLECentral {
    let devices: [String: FakeDevice]
    let connectDelay: Duration
    /// Absent devices are searched for until the connect's `timeout`, as BlueZCentral's scan does.
    let scanUntilTimeout: Bool
    /// (now, maximum) connects in progress at once.
    let concurrency = Mutex((now: 0, max: 0))
    init(_ devices: [String: FakeDevice], connectDelay: Duration = .zero, scanUntilTimeout: Bool = false) {
        self.devices = devices
        self.connectDelay = connectDelay
        self.scanUntilTimeout = scanUntilTimeout
    }

    func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        concurrency.withLock { $0.now += 1; $0.max = max($0.max, $0.now) }
        defer { concurrency.withLock { $0.now -= 1 } }
        if connectDelay > .zero { try? await Task.sleep(for: connectDelay) }
        guard let d = devices[address], d.state.withLock({ $0.present }) else {
            try? await Task.sleep(for: scanUntilTimeout ? timeout : .milliseconds(20))
            throw BLEError(.notFound, "le-connection-abort-by-local")
        }
        let link = FakeLink(device: d)
        d.state.withLock { $0.link = link; $0.connects += 1 }
        return link
    }
}

/// A tiny profile: `{"command":"ping","value":N}` writes [1,N] and expects the device's [1,N];
/// `{"command":"set_level","value":N}` writes [3,N] (no answer expected, attribute `level`);
/// notify [2,x] is a battery push; anything else is garbage.
struct TestDriver: DeviceDriver {
    let notifyCharacteristics = [CharacteristicID("FFF2")]
    var polls: [(interval: Duration, request: DeviceRequest)] = []

    mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
        if command["get"] != nil { return DeviceRequest(writes: [], read: CharacteristicID("2A19")) }
        guard let name = command["command"]?.stringValue else { throw CommandError(.unknownCommand, "no command") }
        guard let v = command["value"]?.intValue, (0...255).contains(v) else {
            throw CommandError(.invalidValue, "value: expected 0…255")
        }
        switch name {
        case "ping": return DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [1, UInt8(v)])], expect: "ping:\(v)")
        case "set_level": return DeviceRequest(writes: [.init(CharacteristicID("FFF1"), [3, UInt8(v)])], attribute: "level")
        default: throw CommandError(.unknownCommand, "unknown command '\(name)'")
        }
    }

    func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        [.state(["battery": .int(Int64(value.first ?? 0))])]
    }

    mutating func receive(_ n: GATTNotification) -> [DriverOutput] {
        switch (n.value.first, n.value.count) {
        case (1, 2): return [.response(key: "ping:\(n.value[1])", result: .success(["echo": .int(Int64(n.value[1]))])),
                             .state(["last_ping": .int(Int64(n.value[1]))])]
        case (2, 2): return [.state(["battery": .int(Int64(n.value[1]))])]
        case (4, 2): return [.state(["hardware": ["serial_number": .string("S\(n.value[1])")]])]
        default: return [.malformed("garbage from the device: \(Hex.encode(n.value))")]
        }
    }
}
