import BinaryCoding
import BridgeCore

/// A tiny profile: `{"command":"ping","value":N}` writes [1,N] and expects the device's [1,N];
/// `{"command":"set_level","value":N}` writes [3,N] (no answer expected, attribute `level`);
/// `{"get":…}` reads 2A19 (→ `battery`); notify [2,x] is a battery push, [4,x] a hardware serial;
/// anything else is garbage.
public struct TestDriver: DeviceDriver {
    public let notifyCharacteristics = [CharacteristicID("FFF2")]
    public var polls: [(interval: Duration, request: DeviceRequest)] = []

    public init(polls: [(interval: Duration, request: DeviceRequest)] = []) { self.polls = polls }

    public mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
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

    public func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        [.state(["battery": .int(Int64(value.first ?? 0))])]
    }

    public mutating func receive(_ n: GATTNotification) -> [DriverOutput] {
        switch (n.value.first, n.value.count) {
        case (1, 2): return [.response(key: "ping:\(n.value[1])", result: .success(["echo": .int(Int64(n.value[1]))])),
                             .state(["last_ping": .int(Int64(n.value[1]))])]
        case (2, 2): return [.state(["battery": .int(Int64(n.value[1]))])]
        case (4, 2): return [.state(["hardware": ["serial_number": .string("S\(n.value[1])")]])]
        default: return [.malformed("garbage from the device: \(Hex.encode(n.value))")]
        }
    }
}
