import BlueZSimulator
import GoProCodec
import SwiftProtobuf
import Synchronization

/// A simulated GoPro (spec gopro.md): the GATT table of §1 (service 0xFEA6 with GP-0072…GP-0077),
/// packets reassembled per characteristic (§3), TLV commands, settings and queries answered the
/// way a camera does (§4–§6): status bytes, the setting id echo, register → response with the
/// current values then 0x92/0x93 pushes when values change; the shutter drives `encoding`.
/// Answers are fragmented with counting continuations, as a camera sends them.
/// Protobuf requests (§4.3, §7) get typed answers for Set Camera Control (F1 69, status 114),
/// Set Turbo Active (F1 6B, status 113), Get Preset Status (F5 72, F5 F3 pushes when registered),
/// Get Last Captured Media (F5 6D) and Pairing Finish (03 01 on GP-0091); any other protobuf
/// request gets the `[feature][status]` unsupported form. Get Hardware Info (0x3C) answers
/// ``hardware``; Load Preset Group (0x3E) sets status 96 (Preset Group), Locate (0x16) status 45.
/// Its statuses start as ``initialStatuses``.
public final class SimulatedGoPro: SimulatedDevice {
    /// What Get Hardware Info (§5, 0x3C) reports.
    public struct HardwareInfo: Sendable, Equatable {
        /// The model number (4 bytes big-endian on the wire; 62 is a HERO12 Black).
        public var modelNumber: UInt32
        public var modelName: String
        public var firmware: String
        public var serialNumber: String
        public var apSSID: String
        /// The access point's MAC as 12 lowercase hex digits (ASCII on the wire).
        public var apMAC: String

        public init(modelNumber: UInt32 = 62, modelName: String = "HERO12 Black", firmware: String = "H23.01.01.99.56",
                    serialNumber: String = "C3501324501234", apSSID: String = "GP25011234", apMAC: String = "c0ffee000001") {
            self.modelNumber = modelNumber
            self.modelName = modelName
            self.firmware = firmware
            self.serialNumber = serialNumber
            self.apSSID = apSSID
            self.apMAC = apMAC
        }

        /// The answer's bytes after `3C 00` (§5): length-prefixed model number, model name, the
        /// deprecated field (4 ASCII bytes), firmware, serial number, AP SSID, AP MAC, then 11
        /// reserved bytes.
        var payload: [UInt8] {
            func field(_ bytes: [UInt8]) -> [UInt8] { [UInt8(bytes.count)] + bytes }
            return field(SimulatedGoPro.u32(modelNumber)) + field(Array(modelName.utf8)) + field(Array("0x05".utf8)) + field(Array(firmware.utf8))
                + field(Array(serialNumber.utf8)) + field(Array(apSSID.utf8)) + field(Array(apMAC.utf8))
                + [UInt8](repeating: 0, count: 11)
        }
    }

    struct State {
        var link: SimulatedLink?
        var assemblers: [String: GoProAssembler] = [:]
        /// Status id → value bytes (§11), each of the length a camera sends (booleans and enums
        /// 1 byte, counts u32 BE, SD card remaining u64 BE): what Get Status Values and the
        /// registrations answer. See ``initialStatuses``.
        var statuses: [UInt8: [UInt8]] = SimulatedGoPro.initialStatuses
        /// Setting id → value bytes (§8).
        var settings: [UInt8: [UInt8]] = [2: [1], 3: [8], 121: [4]]
        var statusRegistrations: Set<UInt8> = []
        var settingRegistrations: Set<UInt8> = []
        var received: [[UInt8]] = []
        /// Preset-status registrations of F5 72 (1 preset, 2 preset group array).
        var presetRegistrations: Set<Int> = []
        /// Files recorded so far (one per shutter on → off); the last one answers F5 6D.
        var recordings = 0
        var pairingFinishedBy: String?
        /// The last write of any kind (keep-alive included), as time elapsed on ``time``: the
        /// sleep timer counts from it (§9).
        var lastActivity: Duration = .zero
        var lastDrain: Duration = .zero
        var sleeps = 0
        /// Drops the link (set by ``add(to:alreadyConnected:)`` or ``dropsLink(through:)``).
        var dropLink: (@Sendable () -> Void)?
    }

    public let address: String
    public let advertisement: SimulatedAdvertisement
    public let services: [SimulatedService]
    public let mtu = 23
    let state = Mutex(State())
    /// Idle time (no keep-alive, no other write) after which the camera sleeps; nil: never.
    public let sleepAfter: Duration?
    /// While encoding, the battery (status 70) drops 1 % this often; nil: never.
    public let batteryDrainEvery: Duration?
    /// What Get Hardware Info (0x3C) answers.
    public let hardware: HardwareInfo
    /// Whether registered status and setting changes are pushed (0x92/0x93, F5 F3); false: a
    /// camera that answers and nothing else (registrations still answered with the values).
    public let pushes: Bool
    /// The clock of the sleep timer and the battery drain.
    let time: SimulatorTime
    /// How often the timer task checks them (nil: no timer task).
    let tickInterval: Duration?

    static func gp(_ short: UInt16) -> String { GoProCharacteristic(rawValue: short)!.uuid }

    /// - Parameters:
    ///   - encrypted: the FEA6 and GP-0090 characteristics need a paired link, as on a real
    ///     camera (§2): `encrypt-write` on the request characteristics, `encrypt-notify` on the
    ///     notify ones (which stay unreadable, as in §1); an unpaired client's first access pairs
    ///     it on the way, as bluetoothd does (docs/bluez.md "Automatic security").
    ///   - sleepAfter: with no keep-alive (`5B 01 42`) and no other write for this long, and not
    ///     encoding, the camera sleeps (§9): it drops the link through the emulator it was
    ///     ``add(to:alreadyConnected:)``-ed to and stays connectable — connecting wakes it (§2).
    ///   - batteryDrainEvery: while encoding, status 70 (battery %) drops by 1 this often and is
    ///     pushed to registered clients.
    ///   - executor: where the camera's timer task runs — the emulator's event loop
    ///     (`BlueZSimulator.loop`) keeps the simulated camera on the loop thread; nil: the global pool.
    ///   - hardware: what Get Hardware Info (0x3C) reports.
    ///   - pushes: false: registered value changes are not pushed (``pushes``).
    ///   - clock: what `sleepAfter` and `batteryDrainEvery` are measured on and the timer task
    ///     sleeps on (a test's manual clock makes them happen when the test advances it).
    public init(address: String = "C0:FF:EE:00:00:01", name: String = "GoPro 1234", encrypted: Bool = true,
                sleepAfter: Duration? = nil, batteryDrainEvery: Duration? = nil, hardware: HardwareInfo = HardwareInfo(),
                pushes: Bool = true, executor: (any TaskExecutor)? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        self.address = address.uppercased()
        self.pushes = pushes
        let time = SimulatorTime(clock)
        self.time = time
        self.hardware = hardware
        self.sleepAfter = sleepAfter
        self.batteryDrainEvery = batteryDrainEvery
        advertisement = Self.advertisement(address: self.address, name: name)
        let write = encrypted ? ["write", "encrypt-write"] : ["write"]
        let notify = encrypted ? ["notify", "encrypt-notify"] : ["notify"]
        services = [
            SimulatedService("FEA6", characteristics: [
                SimulatedCharacteristic(Self.gp(0x72), flags: write),
                SimulatedCharacteristic(Self.gp(0x73), flags: notify),
                SimulatedCharacteristic(Self.gp(0x74), flags: write),
                SimulatedCharacteristic(Self.gp(0x75), flags: notify),
                SimulatedCharacteristic(Self.gp(0x76), flags: write),
                SimulatedCharacteristic(Self.gp(0x77), flags: notify),
            ]),
            SimulatedService("b5f90090-aa8d-11e3-9046-0002a5d5c51b", characteristics: [
                SimulatedCharacteristic(Self.gp(0x91), flags: write),
                SimulatedCharacteristic(Self.gp(0x92), flags: notify),
            ]),
            SimulatedService("180F", characteristics: [SimulatedCharacteristic("2A19", flags: ["read", "notify"], value: [84])]),
        ]
        let periods = [sleepAfter, batteryDrainEvery].compactMap { $0 }
        tickInterval = periods.min().map { min(max($0 / 8, .milliseconds(5)), .milliseconds(250)) }
        if let tick = tickInterval {
            Task(executorPreference: executor) { [weak self] in
                while !Task.isCancelled {
                    try? await time.sleep(for: tick)
                    guard let self else { return }
                    self.timerTick()
                }
            }
        }
    }

    /// A HERO12 Black at rest on battery, as its statuses read after power-on (§11): battery
    /// present (1), 3 bars (2), not overheating (6), not busy (8), not encoding (10), no video
    /// under way (13 = 0), SD card OK (33), 2400 photos and 5400 s of video left (34, 35), no
    /// photos or videos yet (38, 39), not locating (45), 26 575 456 kB free (54), 84 % (70), not
    /// cold (85), the video preset group (96 = 1000), no turbo transfer (113), camera control
    /// idle (114).
    static let initialStatuses: [UInt8: [UInt8]] = [
        1: [1], 2: [3], 6: [0], 8: [0], 10: [0], 13: u32(0), 33: [0], 34: u32(2400), 35: u32(5400), 38: u32(0), 39: u32(0),
        45: [0], 54: [0, 0, 0, 0, 0x01, 0x95, 0x82, 0x60], 70: [84], 85: [0], 96: u32(1000), 113: [0], 114: [0],
    ]

    /// `v` as 4 bytes big-endian (§11's u32 statuses).
    static func u32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * $0)) } }

    /// Model ID of the simulated camera in its advertisement (62: HERO12 Black, spec gopro.md §10).
    public static let modelID: UInt8 = 62

    /// What a camera advertises (spec gopro.md §10, Open GoPro "BLE Setup", schema version 2):
    /// service 0xFEA6; manufacturer data for company 0x02F2 (the bytes `F2 02` on the air) —
    /// schema version 2, camera status 0x01 (processor awake; Wi-Fi AP off, not pairing, no
    /// central role, no new media), model ID ``modelID``, camera capabilities `01 00` (command
    /// and control), a 6-byte ID hash (the simulator takes the address bytes) and media-offload
    /// status 0; in the scan response the name `GoPro NNNN` and service data for 0xFEA6: 4 bytes
    /// of the AP MAC address (the simulator takes the address' last 4) and the last 4 serial
    /// digits (the name's last 4 characters).
    static func advertisement(address: String, name: String) -> SimulatedAdvertisement {
        let mac = address.split(separator: ":").compactMap { UInt8($0, radix: 16) }
        let manufacturer: [UInt8] = [0x02, 0x01, modelID, 0x01, 0x00] + mac + [0x00]
        let service = Array(mac.suffix(4)) + Array(name.suffix(4).utf8)
        return SimulatedAdvertisement(name: name, rssi: -50, uuids: ["FEA6"], manufacturerData: [0x02F2: manufacturer],
                                      serviceData: ["FEA6": service])
    }

    /// Puts the camera in range of `simulator` and lets it drop its link there when it sleeps.
    public func add(to simulator: BlueZSimulator, alreadyConnected: Bool = false) throws(BlueZSimulatorError) {
        let address = address
        dropsLink(through: { [weak simulator] in try? simulator?.dropLink(address) })
        try simulator.add(self, alreadyConnected: alreadyConnected)
    }

    /// How the camera drops its link when it sleeps (§9), for a front-end other than the emulator
    /// (the radio front-end of `gatt2mqtt peripherals`); ``add(to:alreadyConnected:)`` sets it
    /// for the emulator.
    public func dropsLink(through drop: @escaping @Sendable () -> Void) {
        state.withLock { $0.dropLink = drop }
    }

    /// How often the camera went to sleep (dropped an idle link).
    public var sleepCount: Int { state.withLock { $0.sleeps } }

    /// The sleep timer and the battery drain (§9).
    func timerTick() {
        let now = time.elapsed()
        let (sleep, battery): ((@Sendable () -> Void)?, UInt8?) = state.withLock { s in
            let encoding = s.statuses[10] == [1]
            var battery: UInt8?
            if let every = batteryDrainEvery, encoding, now - s.lastDrain >= every {
                s.lastDrain = now
                let level = s.statuses[70]?.first ?? 0
                if level > 0 { battery = level - 1 }
            }
            if let after = sleepAfter, s.link != nil, !encoding, now - s.lastActivity >= after, let drop = s.dropLink {
                s.sleeps += 1
                s.lastActivity = now
                return (drop, battery)
            }
            return (nil, battery)
        }
        if let battery { setStatus(70, [battery]) }
        sleep?()
    }

    /// The phone name of the last successful Pairing Finish (03 01, §2 step 5), nil before one.
    public var pairingFinishedBy: String? { state.withLock { $0.pairingFinishedBy } }

    /// Every complete message the camera received, in order.
    public var receivedMessages: [[UInt8]] { state.withLock { $0.received } }

    /// Sets a status (e.g. the battery) and pushes it to registered clients.
    public func setStatus(_ id: UInt8, _ value: [UInt8]) {
        let push: [UInt8]? = state.withLock { s in
            s.statuses[id] = value
            return pushes && s.statusRegistrations.contains(id) ? [0x93, 0x00, id, UInt8(value.count)] + value : nil
        }
        if let push { send(push, on: 0x77) }
    }

    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }

    public func linkChanged(_ link: SimulatedLink?) {
        let now = time.elapsed()
        state.withLock { s in
            s.link = link
            s.assemblers = [:]
            s.lastActivity = now  // a connection wakes the camera (§2) and restarts the timer
            if link == nil { s.statusRegistrations = []; s.settingRegistrations = []; s.presetRegistrations = [] }
        }
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        guard let c = try? GoProCharacteristic(identifier: characteristic) else { throw .writeNotPermitted }
        let now = time.elapsed()
        let message: [UInt8]? = state.withLock { s in
            var a = s.assemblers[characteristic] ?? GoProAssembler()
            let m = try? a.append(value)
            s.assemblers[characteristic] = a
            s.lastActivity = now
            if let m = m ?? nil { s.received.append(m) }
            return m ?? nil
        }
        guard let message, !message.isEmpty else { return }
        switch c {
        case .command: command(message)
        case .settings: setting(message)
        case .query: query(message)
        case .networkManagement: protobuf(message, on: 0x92)
        default: break
        }
    }

    func command(_ m: [UInt8]) {
        let id = m[0]
        if [0xF1, 0xF3, 0xF5].contains(id) { return protobuf(m, on: 0x73) }
        if id == 0x01, m.count >= 3 {  // set shutter [01][01][on]
            let on = m[2] != 0
            let now = time.elapsed()
            state.withLock { s in
                if !on, s.statuses[10] == [1] { s.recordings += 1 }  // a recording ends: one more file
                if on, s.statuses[10] != [1] { s.lastDrain = now }
            }
            send([0x01, 0x00], on: 0x73)
            setStatus(8, [on ? 1 : 0])
            setStatus(10, [on ? 1 : 0])
            if on { setStatus(13, [0, 0, 0, 1]) }
            setStatus(8, [0])
            return
        }
        if id == 0x3C { return send([id, 0x00] + hardware.payload, on: 0x73) }  // Get Hardware Info (§5)
        if id == 0x16, m.count == 3, m[1] == 1, m[2] <= 1 {  // Locate [16][01][0/1] (§5) → status 45 (§11)
            send([id, 0x00], on: 0x73)
            return setStatus(45, [m[2]])
        }
        if id == 0x3E, m.count == 4, m[1] == 2 {  // Load Preset Group [3E][02][group u16] (§5)
            let group = UInt16(m[2]) << 8 | UInt16(m[3])
            guard (1000...1002).contains(group) else { return send([id, 0x02], on: 0x73) }
            send([id, 0x00], on: 0x73)
            return setStatus(96, [0, 0, m[2], m[3]])
        }
        send([id, 0x00], on: 0x73)
    }

    func setting(_ m: [UInt8]) {
        let id = m[0]
        guard m.count >= 2, m.count == 2 + Int(m[1]) else { return send([id, 0x02], on: 0x75) }
        let value = Array(m[2...])
        let (push, presets): ([UInt8]?, [UInt8]?) = state.withLock { s in
            if id == 0x5B { return (nil, nil) }  // keep-alive: no stored value
            s.settings[id] = value
            let push = pushes && s.settingRegistrations.contains(id) ? [0x92, 0x00, id, UInt8(value.count)] + value : nil
            // A setting of the active preset changed: registered clients get F5 F3 (§7).
            let presets = pushes && Self.presetSettingIDs.contains(id) && !s.presetRegistrations.isEmpty
                ? [0xF5, 0xF3] + Self.presetStatus(s.settings) : nil
            return (push, presets)
        }
        send([id, 0x00], on: 0x75)
        if let push { send(push, on: 0x77) }
        if let presets { send(presets, on: 0x77) }
    }

    func query(_ m: [UInt8]) {
        let q = m[0]
        if [0xF1, 0xF3, 0xF5].contains(q) { return protobuf(m, on: 0x77) }
        let ids = Array(m.dropFirst())
        let response: [UInt8] = state.withLock { s in
            func entries(_ table: [UInt8: [UInt8]], _ wanted: [UInt8]) -> [UInt8] {
                let keys = wanted.isEmpty ? table.keys.sorted() : wanted
                return keys.flatMap { k -> [UInt8] in
                    guard let v = table[k] else { return [] }
                    return [k, UInt8(v.count)] + v
                }
            }
            switch q {
            case 0x13: return [q, 0x00] + entries(s.statuses, ids)
            case 0x12: return [q, 0x00] + entries(s.settings, ids)
            case 0x53:
                s.statusRegistrations.formUnion(ids.isEmpty ? Array(s.statuses.keys) : ids)
                return [q, 0x00] + entries(s.statuses, ids)
            case 0x52:
                s.settingRegistrations.formUnion(ids.isEmpty ? Array(s.settings.keys) : ids)
                return [q, 0x00] + entries(s.settings, ids)
            case 0x73:
                if ids.isEmpty { s.statusRegistrations = [] } else { s.statusRegistrations.subtract(ids) }
                return [q, 0x00]
            case 0x72:
                if ids.isEmpty { s.settingRegistrations = [] } else { s.settingRegistrations.subtract(ids) }
                return [q, 0x00]
            default: return [q, 0x02]
            }
        }
        send(response, on: 0x77)
    }

    // MARK: Protobuf (§4.3, §7)

    /// Answers a protobuf request `[feature][action][proto2]` on the response characteristic.
    func protobuf(_ m: [UInt8], on response: UInt16) {
        let feature = m[0]
        guard m.count >= 2 else { return send([feature, 0x02], on: response) }
        let action = m[1]
        let body = Array(m.dropFirst(2))
        let answer: [UInt8]
        do {
            switch (feature, action) {
            case (0xF1, 0x69):
                let r = try OpenGopro_RequestSetCameraControlStatus(serializedBytes: body)
                answer = try Self.generic(0xF1, 0xE9, .resultSuccess)
                send(answer, on: response)
                return setStatus(114, [UInt8(truncatingIfNeeded: r.cameraControlStatus.rawValue)])
            case (0xF1, 0x6B):
                let r = try OpenGopro_RequestSetTurboActive(serializedBytes: body)
                send(try Self.generic(0xF1, 0xEB, .resultSuccess), on: response)
                return setStatus(113, [r.active ? 1 : 0])
            case (0xF5, 0x72):
                let r = try OpenGopro_RequestGetPresetStatus(serializedBytes: body)
                let settings: [UInt8: [UInt8]] = state.withLock { s in
                    s.presetRegistrations.formUnion(r.registerPresetStatus.map(\.rawValue))
                    s.presetRegistrations.subtract(r.unregisterPresetStatus.map(\.rawValue))
                    return s.settings
                }
                answer = [0xF5, 0xF2] + Self.presetStatus(settings)
            case (0xF5, 0x6D):
                _ = try OpenGopro_RequestGetLastCapturedMedia(serializedBytes: body)
                let n = state.withLock { $0.recordings }
                var r = OpenGopro_ResponseLastCapturedMedia()
                if n == 0 {
                    r.result = .resultResourceNotAvailable
                } else {
                    r.result = .resultSuccess
                    r.media.folder = "100GOPRO"
                    let digits = String(n % 10000)
                    r.media.file = "GX01" + String(repeating: "0", count: 4 - digits.count) + digits + ".MP4"
                }
                answer = [0xF5, 0xED] + (try r.serializedBytes())
            case (0x03, 0x01):
                let r = try OpenGopro_RequestPairingFinish(serializedBytes: body)
                if r.result == .success, !r.phoneName.isEmpty {
                    state.withLock { $0.pairingFinishedBy = r.phoneName }
                }
                answer = try Self.generic(0x03, 0x81, r.phoneName.isEmpty ? .resultArgumentInvalid : .resultSuccess)
            default:
                answer = [feature, 0x02]  // unsupported protobuf (§4.3)
            }
        } catch {
            // A request that does not parse (or lacks a required field): ResponseGeneric ILL_FORMED.
            answer = (try? Self.generic(feature, action | 0x80, .resultIllFormed)) ?? [feature, 0x02]
        }
        send(answer, on: response)
    }

    static func generic(_ feature: UInt8, _ action: UInt8, _ result: OpenGopro_EnumResultGeneric) throws -> [UInt8] {
        var r = OpenGopro_ResponseGeneric()
        r.result = result
        return [feature, action] + (try r.serializedBytes())
    }

    /// Settings carried by the active preset (video resolution, frame rate, lens) whose change
    /// is a preset change (F5 F3 to registered clients).
    static let presetSettingIDs: Set<UInt8> = [2, 3, 121]

    /// A small realistic NotifyPresetStatus (§7): the video group 1000 (Standard with the current
    /// resolution/fps/lens, Activity, Cinematic), photo group 1001 (Photo, Night), time-lapse
    /// group 1002 (TimeWarp).
    static func presetStatus(_ settings: [UInt8: [UInt8]]) -> [UInt8] {
        func setting(_ id: Int32, _ value: Int32) -> OpenGopro_PresetSetting {
            var s = OpenGopro_PresetSetting()
            s.id = id
            s.value = value
            s.isCaption = false
            return s
        }
        func preset(_ id: Int32, mode: Int32, title: Int32, icon: Int32, _ s: [OpenGopro_PresetSetting]) -> OpenGopro_Preset {
            var p = OpenGopro_Preset()
            p.id = id
            p.mode = mode
            p.titleID = title
            p.titleNumber = 0
            p.userDefined = false
            p.icon = icon
            p.settingArray = s
            p.isModified = false
            p.isFixed = true
            p.isVisible = true
            return p
        }
        func group(_ id: Int32, icon: Int32, modes: [Int32], _ presets: [OpenGopro_Preset]) -> OpenGopro_PresetGroup {
            var g = OpenGopro_PresetGroup()
            g.id = id
            g.presetArray = presets
            g.canAddPreset = true
            g.icon = icon
            g.modeArray = modes
            return g
        }
        func current(_ id: UInt8, _ fallback: Int32) -> Int32 { settings[id].flatMap { $0.first }.map(Int32.init) ?? fallback }
        let video = [setting(2, current(2, 1)), setting(3, current(3, 8)), setting(121, current(121, 4))]
        var n = OpenGopro_NotifyPresetStatus()
        n.presetGroupArray = [
            group(1000, icon: 0, modes: [12, 15, 13], [
                preset(0, mode: 12, title: 0, icon: 0, video),
                preset(1, mode: 12, title: 1, icon: 1, [setting(2, 1), setting(3, 5), setting(121, 4)]),
                preset(2, mode: 12, title: 2, icon: 2, [setting(2, 1), setting(3, 8), setting(121, 3)]),
            ]),
            group(1001, icon: 1, modes: [17, 18], [
                preset(65536, mode: 17, title: 13, icon: 13, [setting(122, 19)]),
                preset(65537, mode: 18, title: 14, icon: 14, [setting(122, 19)]),
            ]),
            group(1002, icon: 2, modes: [24, 13], [
                preset(131072, mode: 24, title: 20, icon: 20, [setting(2, 1)]),
            ]),
        ]
        return (try? n.serializedBytes()) ?? []
    }

    /// Sends a message as a camera does: general header when it fits, extended-13 otherwise,
    /// continuation packets counting 0x80…0x8F.
    func send(_ message: [UInt8], on short: UInt16) {
        guard let link = state.withLock({ $0.link }) else { return }
        let header: GoProStartHeader = message.count <= 31 ? .general : .extended13
        guard let packets = try? GoProPacketizer.packetize(message, startHeader: header, continuation: .counting) else { return }
        for p in packets { link.notify(Self.gp(short), Array(p)) }
    }
}
