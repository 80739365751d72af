import BinaryCoding
import BridgeCore
import GoProCodec

/// A GoPro camera over Open GoPro BLE (`shared/spec/gopro.md`): requests packetized to the
/// command/settings/query/network characteristics (§3–§7), one assembler per notify
/// characteristic, answers matched by §4.5 identifiers, status and setting pushes merged into
/// the state by name. On each connect it registers for updates of the statuses and settings
/// its Home Assistant entities show (and Busy and Encoding, §9 readiness) by id — the form GoPro
/// documents, `53 id…` / `52 id…` — then for all of them (the empty list, §6); each answer carries
/// the current values, so the state is re-read on every connect; keep-alive every 3 s (§9);
/// while the camera is busy or encoding, only queries and shutter-off pass (§9 readiness).
/// The characteristics are encryption-protected (§2), so the camera must be paired: after the
/// connect that first paired it, Pairing Finish (03 01, `RequestPairingFinish{SUCCESS, phone
/// name}`) goes out before the registrations (§2 step 5). After them, Get Hardware Info (§5,
/// 0x3C; §2 step 4 names it the readiness probe) fills the state's `hardware` — model, firmware,
/// serial number — which Home Assistant shows on the device.
public struct GoProDriver: DeviceDriver {
    static func id(_ c: GoProCharacteristic) -> CharacteristicID { CharacteristicID(c.uuid) }

    public let notifyCharacteristics = GoProCharacteristic.allCases.filter(\.isNotify).map(GoProDriver.id)
    var assemblers: [GoProCharacteristic: GoProAssembler] = [:]
    /// The request in flight: its key for the core and the identifier that answers it.
    var pending: (key: String, expected: GoProResponseID)?
    var sequence = 0
    var busy = false
    var encoding = false
    /// A connect paired the camera: Pairing Finish is due in the start-up requests of every
    /// connect until the camera answers it (a link lost in between does not lose it).
    var pairingFinishDue = false
    /// The phone name Pairing Finish announces (§7: any non-empty string).
    public let phoneName: String
    /// The keep-alive period (§9: 3 s).
    public let keepAliveInterval: Duration
    /// The statuses registered for by id at connect (Busy and Encoding first, then those with
    /// Home Assistant entities).
    public let connectStatuses: [UInt8]
    /// The settings registered for by id at connect (those with Home Assistant entities).
    public let connectSettings: [UInt8]

    /// - Parameters:
    ///   - phoneName: what the camera shows as the paired client (Pairing Finish, §2 step 5).
    ///   - keepAliveInterval: how often `5B 01 42` goes out (§9 says 3 s; tests use less).
    ///   - statuses, settings: what to register for by id at connect (default: what the
    ///     profile's Home Assistant entities show, ``GoProProfile/entityValues``).
    public init(phoneName: String = "gatt2mqtt", keepAliveInterval: Duration = .seconds(3),
                statuses: [UInt8] = GoProProfile.entityValues.statuses, settings: [UInt8] = GoProProfile.entityValues.settings) {
        self.phoneName = phoneName.isEmpty ? "gatt2mqtt" : phoneName
        self.keepAliveInterval = keepAliveInterval
        let readiness: [UInt8] = [8, 10]  // Busy, Encoding (§9)
        connectStatuses = readiness + statuses.filter { !readiness.contains($0) }
        connectSettings = settings
    }

    /// The GoPro characteristics need an encrypted (bonded) link (§2).
    public var requiresPairing: Bool { true }

    public mutating func didPair() { pairingFinishDue = true }

    public var isBusy: Bool { busy || encoding }

    public var keepAlive: (interval: Duration, request: DeviceRequest)? {
        let r = GoProRequest.keepAlive
        return (keepAliveInterval, Self.deviceRequest(r, key: nil, bypass: true))
    }

    public mutating func startupRequests() throws(CommandError) -> [DeviceRequest] {
        var out: [DeviceRequest] = []
        if pairingFinishDue { out.append(try pairingFinish()) }
        // By id first (GoPro's documented form): the entities' values even from a camera that
        // does not take the empty list as "all". The registrations for all (§6), for the rest of
        // the state, follow the last answer (``registerAll()``): one request per answer id pending.
        registerAllAfter = nil
        for (name, ids) in [("register_status_value_updates", connectStatuses), ("register_setting_value_updates", connectSettings)]
            where !ids.isEmpty {
            let r = try encode(["query": .string(name), "ids": .array(ids.map { .int(Int64($0)) })], mtu: BridgeDefaults.attMTU)
            registerAllAfter = r.expect
            out.append(r)
        }
        if registerAllAfter == nil { out += try registerAll() }
        var hardwareInfo = try encode(["command": "get_hardware_info"], mtu: BridgeDefaults.attMTU)
        hardwareInfo.bypassesBusyGate = true  // a query in all but name: it changes nothing
        out.append(hardwareInfo)
        return out
    }

    /// The key of the last by-id registration of ``startupRequests()``: its answer (or failure)
    /// brings ``registerAll()``.
    var registerAllAfter: String?

    /// Register for all status and setting value updates (the empty id list, §6).
    mutating func registerAll() throws(CommandError) -> [DeviceRequest] {
        var out: [DeviceRequest] = []
        for name in ["register_status_value_updates", "register_setting_value_updates"] {
            out.append(try encode(["query": .string(name)], mtu: BridgeDefaults.attMTU))
        }
        return out
    }

    /// The registrations for all when `key` is the last by-id registration's (answered or failed).
    mutating func registrationsAfter(_ key: String?) -> [DriverOutput] {
        guard let key, key == registerAllAfter else { return [] }
        registerAllAfter = nil
        return ((try? registerAll()) ?? []).map { .request($0) }
    }

    public mutating func internalRequestFailed(_ request: DeviceRequest, _ error: CommandError) -> [DriverOutput] {
        registrationsAfter(request.expect)
    }

    /// The state's `hardware` from a Get Hardware Info answer (§5, 0x3C): the codec's fields
    /// that describe the camera (not its Wi-Fi access point).
    static func hardware(_ r: GoProTLVResponse) -> JSONObject? {
        guard r.id == GoProCommandID.getHardwareInfo.rawValue, r.status == 0,
              let fields = GoProResponse.command(r).json.objectValue, fields["model_name"] != nil else { return nil }
        var o = JSONObject()
        for key in ["model_number", "model_name", "firmware_version", "serial_number"] {
            if let v = fields[key] { o[key] = v }
        }
        return o
    }

    /// Set Pairing State (§7 03 01 on GP-0091): `RequestPairingFinish{result SUCCESS, phoneName}`,
    /// answered by ResponseGeneric on GP-0092.
    mutating func pairingFinish() throws(CommandError) -> DeviceRequest {
        let request: GoProRequest
        do {
            request = try GoProRequest(json: ["command": "set_pairing_complete", "result": "success", "phone_name": .string(phoneName)])
        } catch {
            throw CommandError(.invalidValue, error.description)
        }
        sequence += 1
        let key = "gopro:\(sequence)"
        pendingCandidates[key] = request.expectedResponse
        return Self.deviceRequest(request, key: key, bypass: true)
    }

    static func deviceRequest(_ r: GoProRequest, key: String?, bypass: Bool) -> DeviceRequest {
        // Messages the vocabulary builds are far below the 8191-byte packetizer limit.
        let writes = ((try? r.packets()).map { $0.map { DeviceRequest.Write(id(r.characteristic), Array($0)) } }) ?? []
        return DeviceRequest(writes: writes, expect: key, bypassesBusyGate: bypass)
    }

    public mutating func encode(_ command: JSONObject, mtu: Int) throws(CommandError) -> DeviceRequest {
        var body = command
        if body["command"] == nil, body["setting"] == nil, body["query"] == nil {
            // Shortcuts: `/set/shutter` ← ON, `/set/<setting>` ← value, `/get`.
            guard body.count == 1, let (key, value) = body.members.first.map({ ($0.key, $0.value) }) else {
                throw CommandError(.unknownCommand, "needs one of \"command\", \"setting\" or \"query\"")
            }
            switch key {
            case "shutter": body = ["command": "set_shutter", "value": value]
            case "get": body = ["query": "get_status_values"]
            default: body = ["setting": .string(key), "value": value]
            }
        }
        let request: GoProRequest
        do { request = try GoProRequest(json: .object(body)) } catch {
            switch error {
            case .unknownOperation: throw CommandError(.unknownCommand, error.description)
            default: throw CommandError(.invalidValue, error.description)
            }
        }
        sequence += 1
        let key = "gopro:\(sequence)"
        let name = body["command"], setting = body["setting"]
        let isQuery = body["query"] != nil
        let isShutter = name == "set_shutter"
        let shutterOff = isShutter && (body["value"] == false || body["value"] == "off")
        // HiLight tags a moment of the recording: only meaningful while encoding (spec gopro.md §5,
        // 0x18 "only while encoding"), so it passes the busy gate like shutter-off and queries.
        let hilight = name == "hilight_moment"
        var r = Self.deviceRequest(request, key: key, bypass: isQuery || shutterOff || hilight)
        r.attribute = setting.map { "setting:\($0.jsonText)" } ?? (isShutter ? "shutter" : nil)
        pendingCandidates[key] = request.expectedResponse
        return r
    }

    /// Expected answers by key, for requests encoded but not yet answered; the core sends one
    /// at a time, so the newest dispatched one is matched first.
    var pendingCandidates: [String: GoProResponseID] = [:]

    public mutating func receive(_ notification: GATTNotification) -> [DriverOutput] {
        guard let c = try? GoProCharacteristic(identifier: notification.characteristic.uuid) else {
            return [.malformed("GoPro: notification on unknown characteristic \(notification.characteristic)")]
        }
        var assembler = assemblers[c] ?? GoProAssembler()
        let abandonedBefore = assembler.abandonedMessages
        let message: [UInt8]?
        do { message = try assembler.append(notification.value) } catch {
            assemblers[c] = assembler
            return [.malformed("GoPro \(c.shortName): \(error)")]
        }
        assemblers[c] = assembler
        // A start packet while a message was incomplete: that message's remaining packets were
        // lost. Say so (the new message goes on), rather than dropping it silently (§3).
        var out: [DriverOutput] = []
        if assembler.abandonedMessages != abandonedBefore {
            out.append(.malformed("GoPro \(c.shortName): a message was cut short (its remaining packets never came); discarded"))
        }
        guard let message else { return out }
        let response: GoProResponse
        do { response = try GoProResponse(decoding: message, on: c) } catch {
            return out + [.malformed("GoPro \(c.shortName): \(error) in \(Hex.encode(message))")]
        }
        return out + handle(response)
    }

    mutating func handle(_ response: GoProResponse) -> [DriverOutput] {
        var out: [DriverOutput] = []
        var state = JSONObject()
        if case let .query(q) = response {
            state = q.namedValues
            if let b = state["busy"]?.boolValue { busy = b }
            if let e = state["encoding"]?.boolValue { encoding = e }
            if !state.isEmpty { out.append(.state(state)) }
        }
        if case let .command(r) = response, let hardware = Self.hardware(r) { out.append(.state(["hardware": .object(hardware)])) }
        if response.isAsynchronous {
            if case .protobuf = response { out.append(.event(response.json)) }
            return out
        }
        if response.identifier == .protobuf(feature: 0x03, action: 0x81) { pairingFinishDue = false }
        // The core runs one request at a time: the answer belongs to a candidate it matches.
        if let (key, _) = pendingCandidates.first(where: { $0.value.isAnswered(by: response.identifier) }) {
            // Every candidate this answer matches is done with (removed in place: no copy of the table).
            pendingCandidates[key] = nil
            while let other = pendingCandidates.first(where: { $0.value.isAnswered(by: response.identifier) })?.key { pendingCandidates[other] = nil }
            switch response.outcome {
            case .success?, nil:
                var data = response.json
                if case .query = response { data = .object(state) }
                out.append(.response(key: key, result: .success(data)))
            case let .failure(code)?:
                out.append(.response(key: key, result: .failure(CommandError(.deviceError, "the camera answered \(code) (\(response.identifier))"))))
            }
            out += registrationsAfter(key)
        }
        return out
    }

    public mutating func linkLost() {
        assemblers = [:]
        pendingCandidates = [:]
        registerAllAfter = nil
        busy = false
        encoding = false
    }
}
