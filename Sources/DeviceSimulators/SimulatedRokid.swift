import BinaryCoding
import BlueZSimulator
import CapsCodec
import Synchronization

/// Simulated Rokid glasses on the GATT data path (spec rokid-caps.md §4): service 0x9100, write
/// 0x9201, notify 0x9202, readable 0x9300/0x9301 (Caps `SSSuu`: ``serviceRecord``, the address,
/// account "", type 1, 1). A Caps stream in; AUTH_REQ carrying ``serviceRecord`` → AUTH_RESP
/// retCode 0; another record → per ``AuthMode`` retCode −4 or no answer (§4.2, §5.2), and the
/// link stays unauthenticated (``AuthMode/taken``: −6 whatever the record); REQUESTs before a
/// good AUTH_REQ get no answer (as the glasses).
/// REQUEST → RESPONSE with the same request id (args: the sub-command and data);
/// brightness and volume kept, `Dev_GetGlassInfo` answered with a JSON payload, custom view
/// state notified (`Custom_View_Opened`/`Closed`); responses sliced to MTU − 3. With a
/// `batteryInterval`, an authenticated phone gets `NOTIFY(Dev, Dev_BatteryChanged u level)`
/// periodically, as the glasses push battery changes (rokid-caps.md §6 `Dev_BatteryChanged`
/// G→P; the payload shape is the simulator's choice, §8 item 3), the level dropping 1 % per
/// notify down to 1 %.
public final class SimulatedRokid: SimulatedDevice {
    /// What the glasses do with an AUTH_REQ (`gatt2mqtt simulate --rokid-auth`).
    public enum AuthMode: String, Sendable, CaseIterable {
        /// The record from 0x9301 → retCode 0; another → AUTH_RESP retCode −4, "service record
        /// mismatch" (§5.2 step 4).
        case refuse
        /// The record from 0x9301 → retCode 0; another → no AUTH_RESP at all (the glasses'
        /// native handler on a failed GATT auth, §4.2).
        case silent
        /// Any record → retCode 0 (no check).
        case ok
        /// Every AUTH_REQ → retCode −6, "already connected or rejected" (glasses taken by another
        /// phone, §5.2): a refusal whatever the record.
        case taken
    }

    struct State {
        var link: SimulatedLink?
        var reader = CapsStreamReader()
        var authenticated = false
        var brightness: UInt32 = 5
        var volume: UInt32 = 7
        var battery: UInt32 = 90
        var received: [CXRPacket] = []
        var authMode: AuthMode
    }

    public let address: String
    public let advertisement: SimulatedAdvertisement
    public let services: [SimulatedService]
    public let mtu = 185
    /// The service-record UUID published in 0x9301 and expected in AUTH_REQ (random per device).
    public let serviceRecord: String
    let state: Mutex<State>
    /// How often `Dev_BatteryChanged` is notified while an authenticated phone is connected; nil: never.
    public let batteryInterval: Duration?

    /// `executor`: where the periodic battery task runs — the emulator's event loop
    /// (`BlueZSimulator.loop`) keeps the simulated glasses on the loop thread; nil: the global pool.
    /// `auth`: the answer to an AUTH_REQ with another record (``authMode``). `clock`: what the
    /// battery task sleeps on (a test's manual clock makes the notifies happen when the test
    /// advances it).
    public init(address: String = "C0:FF:EE:00:00:02", name: String = "Rokid Glasses", batteryInterval: Duration? = nil,
                auth: AuthMode = .refuse, executor: (any TaskExecutor)? = nil, clock: any Clock<Duration> = ContinuousClock()) {
        self.address = address.uppercased()
        self.batteryInterval = batteryInterval
        serviceRecord = Self.randomUUID()
        state = Mutex(State(authMode: auth))
        advertisement = SimulatedAdvertisement(name: name, rssi: -58, uuids: ["9100"], serviceData: ["9A01": Array("SIM0001".utf8)])
        let record = CXRConnectionInfo(serviceRecord: serviceRecord, mac: address.uppercased(), account: "", glassesType: 1, extra: 1)
        let info = (try? record.encoded()) ?? []
        services = [
            SimulatedService("9100", characteristics: [
                SimulatedCharacteristic("9201", flags: ["write", "write-without-response"]),
                SimulatedCharacteristic("9202", flags: ["notify"]),
                SimulatedCharacteristic("9300", flags: ["read"], value: info),
                SimulatedCharacteristic("9301", flags: ["read"], value: info),
            ]),
        ]
        if let batteryInterval {
            let time = SimulatorTime(clock)
            Task(executorPreference: executor) { [weak self] in
                while !Task.isCancelled {
                    try? await time.sleep(for: batteryInterval)
                    guard let self else { return }
                    self.periodicBattery()
                }
            }
        }
    }

    /// One periodic battery notify (to an authenticated phone only).
    func periodicBattery() {
        let level: UInt32? = state.withLock { s in
            guard s.link != nil, s.authenticated else { return nil }
            if s.battery > 1 { s.battery -= 1 }
            return s.battery
        }
        if let level { send(.notify(channel: "Dev", args: CXRPacket.args("Dev_BatteryChanged", .uint32(level)))) }
    }

    /// The answer to an AUTH_REQ with another record; settable while running.
    public var authMode: AuthMode {
        get { state.withLock { $0.authMode } }
        set { state.withLock { $0.authMode = newValue } }
    }

    /// Whether the current link passed AUTH_REQ.
    public var isAuthenticated: Bool { state.withLock { $0.authenticated } }

    /// A random (version 4) UUID in lowercase text form, as the glasses' record (§4.1).
    static func randomUUID() -> String {
        var g = SystemRandomNumberGenerator()
        var b = (0..<16).map { _ in UInt8.random(in: 0...255, using: &g) }
        b[6] = b[6] & 0x0F | 0x40
        b[8] = b[8] & 0x3F | 0x80
        let hex = b.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }
        return [0..<4, 4..<6, 6..<8, 8..<10, 10..<16].map { hex[$0].joined() }.joined(separator: "-")
    }

    /// Every packet the glasses received, in order.
    public var receivedPackets: [CXRPacket] { state.withLock { $0.received } }

    /// Changes the battery level and notifies `Dev_BatteryChanged`.
    public func setBattery(_ level: UInt32) {
        state.withLock { $0.battery = level }
        send(.notify(channel: "Dev", args: CXRPacket.args("Dev_BatteryChanged", .uint32(level))))
    }

    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }

    public func linkChanged(_ link: SimulatedLink?) {
        state.withLock { s in
            s.link = link
            s.reader.reset()
            s.authenticated = false
        }
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        guard characteristic.hasPrefix("00009201") else { throw .writeNotPermitted }
        let packets: [CXRPacket] = state.withLock { s in
            let objects: [Caps]
            do { objects = try s.reader.feed(value) } catch {
                s.reader.reset()
                return []
            }
            let p = objects.compactMap { try? CXRPacket(caps: $0) }
            s.received += p
            return p
        }
        for p in packets { answer(p) }
    }

    func answer(_ packet: CXRPacket) {
        switch packet {
        case let .authRequest(request):
            // A refused AUTH_REQ leaves the link unauthenticated, even after an earlier good one.
            let (accepted, mode) = state.withLock { s in
                s.authenticated = s.authMode == .ok || (s.authMode != .taken && request.serviceRecord == serviceRecord)
                return (s.authenticated, s.authMode)
            }
            let retCode: Int32? = switch mode {
            case _ where accepted: 0
            case .refuse: -4
            case .taken: -6
            case .silent, .ok: nil  // silent: no answer at all
            }
            if let retCode {
                send(.authResponse(CXRAuthResponse(major: 1, minor: 12, retCode: retCode, clientMac: "02:00:00:00:00:01")))
            }
        case let .request(id, _, args):
            guard state.withLock({ $0.authenticated }) else { return }  // silence, as the glasses do
            let sub = packet.subCommand ?? ""
            var data: [CapsValue] = Array(args.members.dropFirst())
            var notify: CXRPacket?
            state.withLock { s in
                switch sub {
                case "Dev_GlassBrightness": if case let .uint32(v)? = data.first { s.brightness = v }
                case "Dev_GlassSound": if case let .uint32(v)? = data.first { s.volume = v }
                case "Dev_GetGlassInfo":
                    data = [.string(#"{"battery":\#(s.battery),"brightness":\#(s.brightness),"volume":\#(s.volume)}"#)]
                case "Open_Custom_View": notify = .notify(channel: "Custom_View", args: CXRPacket.args("Custom_View_Opened"))
                case "Close_Custom_View": notify = .notify(channel: "Custom_View", args: CXRPacket.args("Custom_View_Closed"))
                default: break
                }
            }
            send(.response(requestID: id, args: Caps([.string(sub)] + data)))
            if let notify { send(notify) }
        default:
            break
        }
    }

    /// Sends a packet on 0x9202 in slices of MTU − 3 (no framing per slice, §4.3).
    func send(_ packet: CXRPacket) {
        guard let link = state.withLock({ $0.link }), let bytes = try? packet.encoded() else { return }
        let size = mtu - 3
        for start in stride(from: 0, to: bytes.count, by: size) {
            link.notify("9202", Array(bytes[start..<min(start + size, bytes.count)]))
        }
    }
}
