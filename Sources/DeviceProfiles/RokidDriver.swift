import BinaryCoding
import BridgeCore
import CapsCodec

/// Rokid glasses over the GATT data path (`shared/spec/rokid-caps.md` §4.2 type 2): CXR packets
/// as a Caps byte stream written to 0x9201 and notified on 0x9202 (§4.3, §4.5). On each connect:
/// AUTH_REQ → AUTH_RESP (§5.2); then REQUEST → RESPONSE matched by request id (§5.4). NOTIFY
/// packets become events, and the known ones (battery, brightness, volume, custom view) state.
public struct RokidDriver: DeviceDriver {
    public static let writeCharacteristic = CharacteristicID("9201", service: "9100")
    public static let notifyCharacteristic = CharacteristicID("9202", service: "9100")

    public let notifyCharacteristics = [RokidDriver.notifyCharacteristic]
    /// The service record sent in AUTH_REQ (read from 0x9301 on hardware; any string on the GATT path).
    let serviceRecord: String
    let now: @Sendable () -> UInt64
    var nextRequestID: UInt32 = 1
    var reader = CapsStreamReader()
    /// State to merge when the RESPONSE to a request arrives (a `set_*` succeeded).
    var pendingState: [UInt32: JSONObject] = [:]

    /// - Parameters:
    ///   - serviceRecord: what AUTH_REQ carries as the service record.
    ///   - now: nanoseconds since the epoch, for AUTH_REQ's client time.
    public init(serviceRecord: String, now: @escaping @Sendable () -> UInt64) {
        self.serviceRecord = serviceRecord
        self.now = now
    }

    public mutating func startupRequests() throws(CommandError) -> [DeviceRequest] {
        let auth = CXRPacket.authRequest(CXRAuthRequest(serviceRecord: serviceRecord, clientTime: now()))
        let bytes: [UInt8]
        do { bytes = try auth.encoded() } catch { throw CommandError(.internalError, "AUTH_REQ: \(error)") }
        return [DeviceRequest(writes: Self.slices(bytes, mtu: 23), expect: "auth")]
    }

    public mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
        var body = command
        // `/set/brightness` ← 8 and `/get` shortcuts.
        if body["command"] == nil, body.count == 1, let (key, value) = body.members.first.map({ ($0.key, $0.value) }) {
            switch key {
            case "brightness", "volume": body = ["command": .string("set_\(key)"), "value": value]
            case "get": body = ["command": "get_glass_info"]
            default: throw CommandError(.unknownCommand, "unknown attribute '\(key)' (brightness, volume, or a command object)")
            }
        }
        let cxr: CXRCommand
        do { cxr = try CXRCommand(json: .object(body)) } catch {
            if case let .invalidCommand(field, reason) = error {
                let code: ErrorCode = field == "command" && reason.hasPrefix("unknown") ? .unknownCommand : .invalidValue
                throw CommandError(code, "\(field): \(reason)")
            }
            throw CommandError(.invalidValue, error.description)
        }
        let id = nextRequestID
        nextRequestID = nextRequestID == UInt32.max ? 1 : nextRequestID + 1
        let bytes: [UInt8]
        do { bytes = try cxr.encoded(requestID: id) } catch { throw CommandError(.invalidValue, error.description) }
        var attribute: String?
        switch cxr {
        case let .setBrightness(v): attribute = "brightness"; pendingState[id] = ["brightness": .int(Int64(v))]
        case let .setVolume(v): attribute = "volume"; pendingState[id] = ["volume": .int(Int64(v))]
        default: break
        }
        return DeviceRequest(writes: Self.slices(bytes, mtu: mtu), expect: "req:\(id)", attribute: attribute)
    }

    /// Cuts a Caps packet into writes of at most MTU − 3 bytes (§4.3: no framing per slice).
    static func slices(_ bytes: [UInt8], mtu: Int) -> [DeviceRequest.Write] {
        let size = max(20, mtu - 3)
        return stride(from: 0, to: bytes.count, by: size).map { start in
            DeviceRequest.Write(writeCharacteristic, Array(bytes[start..<min(start + size, bytes.count)]))
        }
    }

    /// A partial Caps object that gets no more bytes for this long is garbage (the glasses send
    /// a packet's slices back to back): it is dropped when the next notification arrives, so a
    /// bogus size prefix cannot swallow the answers that follow (§4.3 has no resync marker).
    public static let staleGap: UInt64 = 1_000_000_000
    /// When the last notification arrived (`now()`), for ``staleGap``.
    var lastChunkAt: UInt64?

    public mutating func receive(_ notification: GATTNotification) -> [DriverOutput] {
        var out: [DriverOutput] = []
        let t = now()
        if reader.bufferedByteCount > 0, let last = lastChunkAt, t >= last, t - last > Self.staleGap {
            out.append(.malformed("Rokid stream: \(reader.bufferedByteCount) bytes of an incomplete Caps object "
                + "(offset \(reader.offset)) got nothing more for \((t - last) / 1_000_000) ms; dropped, stream reset"))
            reader.reset()
        }
        lastChunkAt = t
        reader.append(notification.value)
        while true {
            let caps: Caps?
            do { caps = try reader.next() } catch {
                reader.reset()
                out.append(.malformed("Rokid stream: \(error); stream reset"))
                return out
            }
            guard let caps else { return out }
            let packet: CXRPacket
            do { packet = try CXRPacket(caps: caps) } catch {
                out.append(.malformed("Rokid packet: \(error)"))
                continue
            }
            out += handle(packet)
        }
    }

    mutating func handle(_ packet: CXRPacket) -> [DriverOutput] {
        switch packet {
        case let .authResponse(a):
            if a.retCode >= 0 { return [.response(key: "auth", result: .success(nil))] }
            return [.response(key: "auth", result: .failure(CommandError(.deviceError, "authentication refused (retCode \(a.retCode))")))]
        case let .response(id, _):
            var out: [DriverOutput] = []
            if let s = pendingState.removeValue(forKey: id) { out.append(.state(s)) }
            if packet.subCommand == "Dev_GetGlassInfo", let info = packet.payload.objectValue {
                out.append(.state(Self.knownState(from: info)))
            }
            // The RESPONSE packet, as JSON, is the command's data on `<device>/response`.
            out.append(.response(key: "req:\(id)", result: .success(packet.json)))
            return out
        case .notify:
            var out: [DriverOutput] = [.event(packet.json)]
            let payload = packet.payload
            switch packet.subCommand {
            case "Dev_BatteryChanged":
                if let level = payload.intValue ?? payload["level"]?.intValue ?? payload["battery"]?.intValue {
                    out.append(.state(["battery": .int(Int64(level))]))
                }
            case "Dev_GlassBrightness":
                if let v = payload.intValue { out.append(.state(["brightness": .int(Int64(v))])) }
            case "Dev_GlassSound":
                if let v = payload.intValue { out.append(.state(["volume": .int(Int64(v))])) }
            case "Custom_View_Opened": out.append(.state(["custom_view": "open"]))
            case "Custom_View_Closed": out.append(.state(["custom_view": "closed"]))
            case "Custom_View_Open_Failed": out.append(.state(["custom_view": "failed"]))
            default: break
            }
            return out
        default:
            return [.event(packet.json)]
        }
    }

    /// Picks the fields the bridge understands from a glass-info payload.
    static func knownState(from info: JSONObject) -> JSONObject {
        var s = JSONObject()
        for (key, names) in [("battery", ["battery", "batteryLevel", "level"]), ("brightness", ["brightness"]), ("volume", ["volume", "sound"])] {
            if let v = names.lazy.compactMap({ info[$0]?.intValue }).first { s[key] = .int(Int64(v)) }
        }
        return s
    }

    public mutating func linkLost() {
        reader.reset()
        lastChunkAt = nil
        pendingState = [:]
    }
}
