import BinaryCoding
import BridgeCore
import CapsCodec

/// Rokid glasses over the GATT data path (`shared/spec/rokid-caps.md` §4.2 type 2): CXR packets
/// as a Caps byte stream written to 0x9201 and notified on 0x9202 (§4.3, §4.5). On each connect
/// (§5.2): read 0x9301 → its service-record UUID (§4.1) → AUTH_REQ with that record → AUTH_RESP;
/// then `Dev_GetGlassInfo` (its answer's battery, brightness and volume into the state); then
/// REQUEST → RESPONSE matched by request id (§5.4). NOTIFY packets become events, and the
/// known ones (battery, brightness, volume, custom view) state.
///
/// When the handshake fails — 0x9301 unreadable or without a record, AUTH_RESP retCode < 0, or
/// no AUTH_RESP within ``authTimeout`` (refusing glasses may stay silent, §4.2) — the driver
/// reports a `device_error` and fails every command on that link with `auth_failed` instead of
/// letting it time out; the next connect reads 0x9301 and authenticates again.
public struct RokidDriver: DeviceDriver {
    public static let writeCharacteristic = CharacteristicID("9201", service: "9100")
    public static let notifyCharacteristic = CharacteristicID("9202", service: "9100")
    /// "RFCOMM connection info" (§4.1): Caps whose member 0 is the service record for AUTH_REQ.
    public static let connectionInfoCharacteristic = CharacteristicID("9301", service: "9100")
    /// How long the glasses get to answer AUTH_REQ (their own auth window is 40 s, §4.3; a
    /// refused AUTH_REQ may get no answer at all, §4.2).
    public static let authTimeout: Duration = .seconds(5)
    /// The `expect` key of AUTH_REQ.
    static let authKey = "auth"

    public let notifyCharacteristics = [RokidDriver.notifyCharacteristic]
    let now: @Sendable () -> UInt64
    /// This driver's bound on the wait for AUTH_RESP (``authTimeout`` unless a test shortens it).
    let authWait: Duration
    var nextRequestID: UInt32 = 1
    var reader = CapsStreamReader()
    /// State to merge when the RESPONSE to a request arrives (a `set_*` succeeded).
    var pendingState: [UInt32: JSONObject] = [:]
    /// Why the glasses cannot be used on this link (the handshake failed); every command ends
    /// with it. Cleared on link loss, so the next connect tries again.
    var refusal: CommandError?

    /// - Parameters:
    ///   - now: nanoseconds since the epoch, for AUTH_REQ's client time.
    ///   - authTimeout: how long to wait for AUTH_RESP.
    public init(now: @escaping @Sendable () -> UInt64, authTimeout: Duration = RokidDriver.authTimeout) {
        self.now = now
        authWait = authTimeout
    }

    /// §5.2 step 1: read 0x9301 (again on every connect: the record may be per session). Its
    /// value leads to AUTH_REQ (``decodeRead(_:_:)``).
    public mutating func startupRequests() throws(CommandError) -> [DeviceRequest] {
        refusal = nil
        return [DeviceRequest(writes: [], read: Self.connectionInfoCharacteristic)]
    }

    /// The 0x9301 value: its service record → AUTH_REQ (§5.2 step 3), or the reason there is none.
    public mutating func decodeRead(_ characteristic: CharacteristicID, _ value: [UInt8]) -> [DriverOutput] {
        guard characteristic.uuid == Self.connectionInfoCharacteristic.uuid else { return [] }
        let info: CXRConnectionInfo
        do { info = try CXRConnectionInfo(decoding: value) } catch {
            return refuse("0x9301 holds no usable service record (\(error))")
        }
        let auth = CXRPacket.authRequest(CXRAuthRequest(serviceRecord: info.serviceRecord, clientTime: now()))
        let bytes: [UInt8]
        do { bytes = try auth.encoded() } catch { return refuse("AUTH_REQ cannot be encoded (\(error))") }
        return [.request(DeviceRequest(writes: Self.slices(bytes, mtu: BridgeDefaults.attMTU), expect: Self.authKey, timeout: authWait))]
    }

    public mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput] {
        if request.read == Self.connectionInfoCharacteristic {
            return refuse("0x9301 (service record) could not be read: \(error.message)")
        }
        guard request.expect == Self.authKey else { return [] }
        if error.code == .timeout {
            return refuse("no AUTH_RESP within \(Self.text(authWait)) (glasses that refuse an AUTH_REQ may not answer it)")
        }
        return refuse("AUTH_REQ could not be written: \(error.message)")
    }

    /// Once authenticated: `Dev_GetGlassInfo` (§6, the `Dev` channel's one request that reads),
    /// so the state has the battery, brightness and volume the answer carries before anything
    /// is set (the protocol has no other way to read them; ``knownState(from:)``). Bounded like
    /// AUTH_REQ: glasses that do not answer it hold the commands back for ``authWait`` at most.
    mutating func glassInfoAtConnect() -> [DriverOutput] {
        guard var r = try? encode(["command": "get_glass_info"], mtu: BridgeDefaults.attMTU) else { return [] }
        r.timeout = authWait
        return [.request(r)]
    }

    /// Enters the refused state: a `device_error` now, `auth_failed` for every command until
    /// the link is lost.
    mutating func refuse(_ reason: String) -> [DriverOutput] {
        [.deviceError(refusal(because: reason))]
    }

    /// Sets and returns ``refusal`` for `reason`.
    mutating func refusal(because reason: String) -> CommandError {
        let error = CommandError(.authFailed, "not authenticated with the glasses: \(reason); retried on the next connect")
        refusal = error
        return error
    }

    /// `5 s`, `300 ms`.
    static func text(_ d: Duration) -> String {
        let ms = d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
        return ms % 1000 == 0 ? "\(ms / 1000) s" : "\(ms) ms"
    }

    /// What a negative AUTH_RESP retCode means (§5.2 step 4).
    public static func authFailureMeaning(_ retCode: Int32) -> String {
        switch retCode {
        case -1: "major version mismatch"
        case -3: "no service record"
        case -4: "service record mismatch"
        case -6: "already connected or rejected"
        default: "unknown refusal"
        }
    }

    public mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
        if let refusal { throw refusal }
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
            if a.retCode >= 0 {
                refusal = nil
                return [.response(key: Self.authKey, result: .success(nil))] + glassInfoAtConnect()
            }
            let error = refusal(because: "AUTH_RESP retCode \(a.retCode) (\(Self.authFailureMeaning(a.retCode)))")
            return [.deviceError(error), .response(key: Self.authKey, result: .failure(error))]
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
        refusal = nil
    }
}
