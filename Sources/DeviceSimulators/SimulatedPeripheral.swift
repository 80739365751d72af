import BlueZSimulator
import Glibc

/// A simulated device named on the command line as `KIND@ADDRESS` (`gatt2mqtt simulate` and
/// `gatt2mqtt peripherals` `--device`, docs/bluez.md "CLI"), e.g. `gopro@C0:FF:EE:00:00:01`;
/// an encrypted advertiser takes its key after `#`: `bthome-encrypted@A4:C1:38:00:00:02#231d…`
/// (32 hex digits; without it, the kind's demo key).
public struct SimulatedDeviceSpec: Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// ``SimulatedGoPro``.
        case gopro
        /// ``SimulatedRokid``.
        case rokid
        /// `GenericDevice.batteryHeartRate`.
        case hr
        /// ``SimulatedThermometer``: temperature, humidity and battery.
        case thermo
        /// ``SimulatedAdvertiser``s (passive, never connected), by format:
        /// ``AdvertiserPayload/bthome`` (BTHome v2, unencrypted).
        case bthome
        /// ``AdvertiserPayload/atc`` (ATC1441's 13 bytes on 0x181A).
        case atc
        /// ``AdvertiserPayload/pvvx`` (PVVX's 15 bytes on 0x181A).
        case pvvx
        /// ``AdvertiserPayload/ruuvi`` (RuuviTag data format 5).
        case ruuvi
        /// ``AdvertiserPayload/govee`` (Govee H5075).
        case govee
        /// ``AdvertiserPayload/bthomeEncrypted(key:counterBase:)`` (BTHome v2, AES-CCM).
        case bthomeEncrypted = "bthome-encrypted"
        /// ``AdvertiserPayload/xiaomi(key:counterBase:)`` (MiBeacon v5, encrypted, as a LYWSD03MMC).
        case xiaomi

        /// The payload of an advertiser kind, nil for a connectable device; an encrypted kind
        /// uses `key` (16 bytes; nil: its demo key) and counts from `counterBase`.
        public func advertiserPayload(key: [UInt8]? = nil, counterBase: UInt32 = 0) -> AdvertiserPayload? {
            switch self {
            case .gopro, .rokid, .hr, .thermo: nil
            case .bthome: AdvertiserPayload.bthome
            case .atc: AdvertiserPayload.atc
            case .pvvx: AdvertiserPayload.pvvx
            case .ruuvi: AdvertiserPayload.ruuvi
            case .govee: AdvertiserPayload.govee
            case .bthomeEncrypted: AdvertiserPayload.bthomeEncrypted(key: key ?? AdvertiserPayload.bthomeDemoKey, counterBase: counterBase)
            case .xiaomi: AdvertiserPayload.xiaomi(key: key ?? AdvertiserPayload.xiaomiDemoKey, counterBase: counterBase)
            }
        }

        /// The payload with the demo key (for an encrypted kind) and counter base 0.
        public var advertiserPayload: AdvertiserPayload? { advertiserPayload() }

        /// Whether the kind encrypts its advertisements (so it takes a key).
        public var takesKey: Bool { self == .bthomeEncrypted || self == .xiaomi }
    }

    public var kind: Kind
    /// Upper case, `C0:FF:EE:00:00:01` form.
    public var address: String
    /// An encrypted advertiser's key (16 bytes); nil: the kind's demo key.
    public var key: [UInt8]?

    public init(kind: Kind, address: String, key: [UInt8]? = nil) {
        self.kind = kind
        self.address = address.uppercased()
        self.key = key
    }

    /// Parses `KIND@ADDRESS` or, for a kind that ``Kind/takesKey``, `KIND@ADDRESS#KEY` (32 hex
    /// digits); nil when the kind is unknown, the address is not six hex pairs, or the key is not
    /// 32 hex digits or is given to a kind that takes none.
    public init?(parsing text: String) {
        let parts = text.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, let kind = Kind(rawValue: parts[0]) else { return nil }
        let rest = parts[1].split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard Self.isAddress(rest[0]) else { return nil }
        var key: [UInt8]?
        if rest.count == 2 {
            guard kind.takesKey, let bytes = Self.key(rest[1]) else { return nil }
            key = bytes
        }
        self.init(kind: kind, address: rest[0], key: key)
    }

    /// 32 hex digits as 16 bytes; nil otherwise.
    public static func key(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        let hex = Set("0123456789abcdefABCDEF".utf8)  // not `isHexDigit` (fullwidth digits), nor a sign
        guard digits.count == 32, digits.allSatisfy(hex.contains) else { return nil }
        let bytes = stride(from: 0, to: 32, by: 2).compactMap { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16) }
        return bytes.count == 16 ? bytes : nil
    }

    /// Whether `text` is a Bluetooth address written as six hex pairs separated by `:`.
    public static func isAddress(_ text: String) -> Bool {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        return parts.count == 6 && parts.allSatisfy { $0.count == 2 && $0.allSatisfy(\.isHexDigit) }
    }

    /// `KIND@ADDRESS` (a given key is not repeated: it may be a secret).
    public var description: String { "\(kind.rawValue)@\(address)" }
}

/// The periods that drive the simulated devices on their own (nil: never).
public struct SimulatedDeviceTimings: Sendable, Equatable {
    /// ``SimulatedGoPro/sleepAfter``.
    public var goproSleepAfter: Duration?
    /// ``SimulatedGoPro/batteryDrainEvery``.
    public var goproBatteryDrain: Duration?
    /// ``SimulatedRokid/batteryInterval``.
    public var rokidBatteryInterval: Duration?
    /// How often a heart-rate sensor notifies a measurement (``SimulatedPeripheral/heartbeats(_:every:)``).
    public var heartRateInterval: Duration?
    /// How often a thermometer takes a reading and notifies what changed
    /// (``SimulatedPeripheral/readings(_:every:)``).
    public var thermoInterval: Duration?
    /// How often an advertiser takes a new reading and bumps its frame counter
    /// (``SimulatedPeripheral/advertising(_:every:clock:changed:)``).
    public var advertiseInterval: Duration?
    /// ``SimulatedGoPro/pushes``: false makes every GoPro a camera that only answers (the bridge
    /// benchmark's comparison with the C floor).
    public var goproPushes: Bool

    public init(goproSleepAfter: Duration? = .seconds(10), goproBatteryDrain: Duration? = .seconds(30),
                rokidBatteryInterval: Duration? = .seconds(30), heartRateInterval: Duration? = .seconds(1),
                thermoInterval: Duration? = .seconds(5), advertiseInterval: Duration? = .seconds(2), goproPushes: Bool = true)
    {
        self.advertiseInterval = advertiseInterval
        self.goproPushes = goproPushes
        self.goproSleepAfter = goproSleepAfter
        self.goproBatteryDrain = goproBatteryDrain
        self.rokidBatteryInterval = rokidBatteryInterval
        self.heartRateInterval = heartRateInterval
        self.thermoInterval = thermoInterval
    }
}

/// A simulated device made from a ``SimulatedDeviceSpec``: the one factory behind every front-end
/// that puts the models in range (the D-Bus emulator of `gatt2mqtt simulate`, the radio
/// front-end of `gatt2mqtt peripherals`), so both serve the same devices.
public enum SimulatedPeripheral: Sendable {
    case gopro(SimulatedGoPro)
    case rokid(SimulatedRokid)
    case heartRate(GenericDevice)
    case thermometer(SimulatedThermometer)
    case advertiser(SimulatedDeviceSpec.Kind, SimulatedAdvertiser)

    /// Makes the device; its timer tasks (GoPro sleep and battery drain, Rokid battery) run on
    /// `executor` (nil: the global pool) and measure `timings` on `clock`. `rokidAuth`: how Rokid
    /// glasses answer AUTH_REQ. An encrypted advertiser's counter starts at `counterBase`
    /// (default: the seconds since 1970, so it grows across runs as a real sensor's does).
    public init(_ spec: SimulatedDeviceSpec, timings: SimulatedDeviceTimings = .init(), rokidAuth: SimulatedRokid.AuthMode = .refuse,
                executor: (any TaskExecutor)? = nil, clock: any Clock<Duration> = ContinuousClock(),
                counterBase: UInt32 = SimulatedPeripheral.wallClockSeconds()) {
        switch spec.kind {
        case .gopro:
            self = .gopro(SimulatedGoPro(address: spec.address, sleepAfter: timings.goproSleepAfter,
                                         batteryDrainEvery: timings.goproBatteryDrain, pushes: timings.goproPushes,
                                         executor: executor, clock: clock))
        case .rokid:
            self = .rokid(SimulatedRokid(address: spec.address, batteryInterval: timings.rokidBatteryInterval, auth: rokidAuth,
                                         executor: executor, clock: clock))
        case .hr:
            self = .heartRate(GenericDevice.batteryHeartRate(address: spec.address))
        case .thermo:
            self = .thermometer(SimulatedThermometer(address: spec.address))
        case .bthome, .atc, .pvvx, .ruuvi, .govee, .bthomeEncrypted, .xiaomi:
            let payload = spec.kind.advertiserPayload(key: spec.key, counterBase: counterBase)!
            self = .advertiser(spec.kind, SimulatedAdvertiser(address: spec.address, payload: payload))
        }
    }

    /// The wall clock in seconds since 1970 (UInt32 holds them until 2106).
    public static func wallClockSeconds() -> UInt32 { UInt32(truncatingIfNeeded: time(nil)) }

    public var kind: SimulatedDeviceSpec.Kind {
        switch self {
        case .gopro: .gopro
        case .rokid: .rokid
        case .heartRate: .hr
        case .thermometer: .thermo
        case let .advertiser(kind, _): kind
        }
    }

    /// The model, as the emulator or a front-end sees it.
    public var device: any SimulatedDevice {
        switch self {
        case let .gopro(camera): camera
        case let .rokid(glasses): glasses
        case let .heartRate(sensor): sensor
        case let .thermometer(sensor): sensor
        case let .advertiser(_, sensor): sensor
        }
    }

    /// Tells a device that drops its own link (a GoPro falling asleep, gopro.md §9) how to do it.
    /// Devices that never drop their link ignore it.
    public func dropsLink(through drop: @escaping @Sendable () -> Void) {
        if case let .gopro(camera) = self { camera.dropsLink(through: drop) }
    }

    /// Notifies a heart-rate measurement (`2A37`, `08 bpm kJ kJ`: bpm cycling 60…90, and the
    /// energy expended, one kJ a beat since the start or since the last `01` written to the
    /// sensor's control point `2A39`, saturating at 0xFFFF as HRS says) from every sensor among
    /// `peripherals` once per `every` on `clock`, until the task is cancelled.
    public static func heartbeats(_ peripherals: [SimulatedPeripheral], every: Duration,
                                  clock: any Clock<Duration> = ContinuousClock()) async {
        let sensors = peripherals.compactMap { p -> GenericDevice? in
            if case let .heartRate(sensor) = p { return sensor }
            return nil
        }
        guard !sensors.isEmpty else { return }
        let time = SimulatorTime(clock)
        var bpm: UInt8 = 60
        var energy = [UInt16](repeating: 0, count: sensors.count)
        var writesSeen = [Int](repeating: 0, count: sensors.count)
        let controlPoint = SimUUID.full("2A39")
        while !Task.isCancelled {
            try? await time.sleep(for: every)
            bpm = bpm >= 90 ? 60 : bpm + 1
            for (i, sensor) in sensors.enumerated() {
                let writes = sensor.writes
                if writes.dropFirst(writesSeen[i]).contains(where: { $0.characteristic == controlPoint && $0.value == [0x01] }) { energy[i] = 0 }
                writesSeen[i] = writes.count
                energy[i] = energy[i] == .max ? .max : energy[i] + 1
                sensor.notify("2A37", [0x08, bpm, UInt8(energy[i] & 0xFF), UInt8(energy[i] >> 8)])
            }
        }
    }

    /// Steps every thermometer among `peripherals` (``SimulatedThermometer/step()``: a slowly
    /// drifting reading, notified while linked) once per `every` on `clock`, until the task is
    /// cancelled.
    public static func readings(_ peripherals: [SimulatedPeripheral], every: Duration,
                                clock: any Clock<Duration> = ContinuousClock()) async {
        let sensors = peripherals.compactMap { p -> SimulatedThermometer? in
            if case let .thermometer(sensor) = p { return sensor }
            return nil
        }
        guard !sensors.isEmpty else { return }
        await repeating(every: every, clock: clock) {
            for sensor in sensors { sensor.step() }
        }
    }

    /// Runs `body` once per `every` on `clock`, until the task is cancelled.
    static func repeating(every: Duration, clock: any Clock<Duration>, _ body: () -> Void) async {
        let time = SimulatorTime(clock)
        while !Task.isCancelled {
            try? await time.sleep(for: every)
            guard !Task.isCancelled else { return }
            body()
        }
    }

    /// Steps every advertiser among `peripherals` (``SimulatedAdvertiser/step()``: new readings,
    /// the next frame counter) once per `every` on `clock`, calling `changed` with each stepped
    /// one (a radio front-end puts its new advertisement on the air), until the task is cancelled.
    public static func advertising(_ peripherals: [SimulatedPeripheral], every: Duration,
                                   clock: any Clock<Duration> = ContinuousClock(),
                                   changed: @Sendable (SimulatedAdvertiser) -> Void = { _ in }) async {
        let advertisers = peripherals.compactMap { p -> SimulatedAdvertiser? in
            if case let .advertiser(_, sensor) = p { return sensor }
            return nil
        }
        guard !advertisers.isEmpty else { return }
        await repeating(every: every, clock: clock) {
            for advertiser in advertisers {
                advertiser.step()
                changed(advertiser)
            }
        }
    }
}
