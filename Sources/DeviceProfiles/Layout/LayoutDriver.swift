import BinaryCoding
import BridgeConfig
import BridgeCore
import CapsCodec
import GattLayout

/// An ordinary GATT device described by characteristic mappings (`devices[].characteristics` in
/// the configuration): each mapped characteristic has a codec — a declarative layout
/// (`docs/layouts.md`), Caps, or raw hex — and a topic. Notifications and reads are decoded to
/// `<base>/<device>/<topic>` and merged into the state under the topic name; `/set` takes
/// `{"<topic>": value}` and `<topic>/write` takes the value directly.
public struct LayoutDriver: DeviceDriver {
    struct Mapping: Sendable {
        var config: CharacteristicMapping
        var id: CharacteristicID
        var layout: GattLayout?
    }

    let mappings: [Mapping]
    public let notifyCharacteristics: [CharacteristicID]
    /// `poll:` mappings: a read every interval (and on each connect).
    public let polls: [(interval: Duration, request: DeviceRequest)]
    /// The other readable mappings (`read` in `direction`, no `poll:`): read once after every
    /// connect, so their topic and state have a value before the device happens to notify
    /// (a `[read, notify]` battery level may notify only when it changes).
    let connectReads: [DeviceRequest]

    /// Parses every mapping's layout now, so a bad layout is a start-up error naming the device.
    public init(device: DeviceConfig) throws(ConfigError) {
        var out: [Mapping] = []
        for (i, c) in device.characteristics.enumerated() {
            var layout: GattLayout?
            if c.codec == .layout, let spec = c.layout {
                do { layout = try LayoutProfile.parseLayout(spec) } catch {
                    throw ConfigError(path: "devices[\(device.id)].characteristics[\(i)].layout", line: nil, message: "\(error)")
                }
            }
            out.append(Mapping(config: c, id: CharacteristicID(c.uuid, service: c.service), layout: layout))
        }
        mappings = out
        notifyCharacteristics = out.filter { $0.config.directions.contains(.notify) }.map(\.id)
        polls = out.compactMap { m in
            m.config.pollInterval.map { ($0, DeviceRequest(writes: [], read: m.id, bypassesBusyGate: true)) }
        }
        connectReads = out.filter { $0.config.directions.contains(.read) && $0.config.pollInterval == nil }
            .map { DeviceRequest(writes: [], read: $0.id, bypassesBusyGate: true) }
    }

    /// A read of each readable mapping that is not polled (a poll is read on connect already);
    /// its value is decoded and published as a notification's would be (``decodeRead(_:_:)``).
    public mutating func startupRequests() throws(CommandError) -> [DeviceRequest] { connectReads }

    func mapping(topic: String) -> Mapping? { mappings.first { $0.config.topic == topic } }

    public mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
        if let get = command["get"] {
            let wanted = get.arrayValue?.compactMap(\.stringValue).first
            let readable = mappings.filter { $0.config.directions.contains(.read) }
            guard let m = wanted.flatMap({ w in readable.first { $0.config.topic == w } }) ?? readable.first else {
                throw CommandError(.unknownCommand, wanted.map { "'\($0)' is not a readable characteristic" } ?? "no readable characteristic")
            }
            return DeviceRequest(writes: [], read: m.id, bypassesBusyGate: true)
        }
        guard command.count == 1, let (topic, value) = command.members.first.map({ ($0.key, $0.value) }) else {
            throw CommandError(.unknownCommand, "expected {\"<characteristic topic>\": value} (topics: \(mappings.map(\.config.topic).joined(separator: ", ")))")
        }
        guard let m = mapping(topic: topic) else {
            throw CommandError(.unknownCommand, "no characteristic topic '\(topic)' (topics: \(mappings.map(\.config.topic).joined(separator: ", ")))")
        }
        var r = try write(m, value: value)
        r.attribute = topic
        return r
    }

    public mutating func encodeWrite(topic: String, payload: [UInt8], mtu: Int) throws(CommandError) -> DeviceRequest {
        guard let m = mapping(topic: topic) else {
            throw CommandError(.unknownCommand, "no characteristic topic '\(topic)'")
        }
        let value: JSONValue
        if m.config.codec == .raw {
            value = .string(String(decoding: payload, as: UTF8.self))
        } else {
            do { value = try JSONValue(parsing: payload) } catch { throw CommandError(.invalidJSON, "\(error)") }
        }
        return try write(m, value: value)
    }

    func write(_ m: Mapping, value: JSONValue) throws(CommandError) -> DeviceRequest {
        guard m.config.directions.contains(.write) else {
            throw CommandError(.invalidValue, "'\(m.config.topic)' is not writable (direction: \(m.config.directions.map(\.rawValue).sorted().joined(separator: ", ")))")
        }
        let bytes: [UInt8]
        switch m.config.codec {
        case .layout:
            guard let layout = m.layout else { throw CommandError(.internalError, "no layout") }
            do { bytes = try layout.encode(value) } catch { throw CommandError(.invalidValue, "\(m.config.topic): \(error)") }
        case .raw:
            guard let text = value.stringValue else { throw CommandError(.invalidValue, "\(m.config.topic): expected hex text") }
            do { bytes = try Hex.decode(text) } catch { throw CommandError(.invalidValue, "\(m.config.topic): \(error)") }
        case .caps:
            do { bytes = try Caps(json: value).encoded() } catch { throw CommandError(.invalidValue, "\(m.config.topic): \(error)") }
        case .gopro:
            throw CommandError(.unknownCommand, "\(m.config.topic): GoPro messages go through a gopro profile device")
        }
        return DeviceRequest(writes: [.init(m.id, bytes)])
    }

    func decode(_ id: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        guard let m = mappings.first(where: { $0.id == id }) ?? mappings.first(where: { $0.id.uuid.lowercased() == id.uuid.lowercased() }) else {
            return [.malformed("value on an unmapped characteristic \(id)")]
        }
        let decoded: JSONValue
        switch m.config.codec {
        case .layout:
            guard let layout = m.layout else { return [] }
            do { decoded = try layout.decode(value) } catch {
                return [.malformed("\(m.config.topic): \(error) in \(Hex.encode(value))")]
            }
        case .raw, .gopro:
            decoded = .string(Hex.encode(value))
        case .caps:
            do { decoded = try Caps(decoding: value).typedJSON } catch {
                return [.malformed("\(m.config.topic): \(error)")]
            }
        }
        return [.characteristic(topic: m.config.topic, value: decoded), .state([m.config.topic: decoded])]
    }

    public func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        decode(characteristic, value)
    }

    public mutating func receive(_ notification: GATTNotification) -> [DriverOutput] {
        decode(notification.characteristic, notification.value)
    }
}
