import BlueZSimulator
import GoProCodec
import Synchronization

/// A simulated GoPro (spec gopro.md): the GATT table of §1 (service 0xFEA6 with GP-0072…GP-0077),
/// packets reassembled per characteristic (§3), TLV commands, settings and queries answered the
/// way a camera does (§4–§6): status bytes, the setting id echo, register → response with the
/// current values then 0x92/0x93 pushes when values change; the shutter drives `encoding`.
/// Answers are fragmented with counting continuations, as a camera sends them.
/// Protobuf requests are answered with the `[feature][status]` unsupported form (§4.3); the
/// Camera Management service (GP-0091/GP-0092) is present for that.
public final class SimulatedGoPro: SimulatedDevice {
    struct State {
        var link: SimulatedLink?
        var assemblers: [String: GoProAssembler] = [:]
        /// Status id → value bytes (§11).
        var statuses: [UInt8: [UInt8]] = [8: [0], 10: [0], 13: [0, 0, 0, 0], 70: [84]]
        /// Setting id → value bytes (§8).
        var settings: [UInt8: [UInt8]] = [2: [1], 3: [8], 121: [4]]
        var statusRegistrations: Set<UInt8> = []
        var settingRegistrations: Set<UInt8> = []
        var received: [[UInt8]] = []
    }

    public let address: String
    public let advertisement: SimulatedAdvertisement
    public let services: [SimulatedService]
    public let mtu = 23
    let state = Mutex(State())

    static func gp(_ short: UInt16) -> String { GoProCharacteristic(rawValue: short)!.uuid }

    public init(address: String = "C0:FF:EE:00:00:01", name: String = "GoPro 1234") {
        self.address = address.uppercased()
        advertisement = SimulatedAdvertisement(name: name, rssi: -50, uuids: ["FEA6"], manufacturerData: [0x02F2: [0x02, 0x01]])
        services = [
            SimulatedService("FEA6", characteristics: [
                SimulatedCharacteristic(Self.gp(0x72), flags: ["write"]),
                SimulatedCharacteristic(Self.gp(0x73), flags: ["notify"]),
                SimulatedCharacteristic(Self.gp(0x74), flags: ["write"]),
                SimulatedCharacteristic(Self.gp(0x75), flags: ["notify"]),
                SimulatedCharacteristic(Self.gp(0x76), flags: ["write"]),
                SimulatedCharacteristic(Self.gp(0x77), flags: ["notify"]),
            ]),
            SimulatedService("b5f90090-aa8d-11e3-9046-0002a5d5c51b", characteristics: [
                SimulatedCharacteristic(Self.gp(0x91), flags: ["write"]),
                SimulatedCharacteristic(Self.gp(0x92), flags: ["notify"]),
            ]),
            SimulatedService("180F", characteristics: [SimulatedCharacteristic("2A19", flags: ["read", "notify"], value: [84])]),
        ]
    }

    /// Every complete message the camera received, in order.
    public var receivedMessages: [[UInt8]] { state.withLock { $0.received } }

    /// Sets a status (e.g. the battery) and pushes it to registered clients.
    public func setStatus(_ id: UInt8, _ value: [UInt8]) {
        let push: [UInt8]? = state.withLock { s in
            s.statuses[id] = value
            return s.statusRegistrations.contains(id) ? [0x93, 0x00, id, UInt8(value.count)] + value : nil
        }
        if let push { send(push, on: 0x77) }
    }

    public func handleRead(_ characteristic: String, current: [UInt8]) throws(SimulatedATTError) -> [UInt8] { current }

    public func linkChanged(_ link: SimulatedLink?) {
        state.withLock { s in
            s.link = link
            s.assemblers = [:]
            if link == nil { s.statusRegistrations = []; s.settingRegistrations = [] }
        }
    }

    public func handleWrite(_ value: [UInt8], to characteristic: String, withResponse: Bool) throws(SimulatedATTError) {
        guard let c = try? GoProCharacteristic(identifier: characteristic) else { throw .writeNotPermitted }
        let message: [UInt8]? = state.withLock { s in
            var a = s.assemblers[characteristic] ?? GoProAssembler()
            let m = try? a.append(value)
            s.assemblers[characteristic] = a
            if let m = m ?? nil { s.received.append(m) }
            return m ?? nil
        }
        guard let message, !message.isEmpty else { return }
        switch c {
        case .command: command(message)
        case .settings: setting(message)
        case .query: query(message)
        case .networkManagement: send([message[0], 0x02], on: 0x92)  // unsupported protobuf (§4.3)
        default: break
        }
    }

    func command(_ m: [UInt8]) {
        let id = m[0]
        if [0xF1, 0xF3, 0xF5].contains(id) { return send([id, 0x02], on: 0x73) }  // unsupported protobuf
        if id == 0x01, m.count >= 3 {  // set shutter [01][01][on]
            let on = m[2] != 0
            send([0x01, 0x00], on: 0x73)
            setStatus(8, [on ? 1 : 0])
            setStatus(10, [on ? 1 : 0])
            if on { setStatus(13, [0, 0, 0, 1]) }
            setStatus(8, [0])
            return
        }
        send([id, 0x00], on: 0x73)
    }

    func setting(_ m: [UInt8]) {
        let id = m[0]
        guard m.count >= 2, m.count == 2 + Int(m[1]) else { return send([id, 0x02], on: 0x75) }
        let value = Array(m[2...])
        let push: [UInt8]? = state.withLock { s in
            if id == 0x5B { return nil }  // keep-alive: no stored value
            s.settings[id] = value
            return s.settingRegistrations.contains(id) ? [0x92, 0x00, id, UInt8(value.count)] + value : nil
        }
        send([id, 0x00], on: 0x75)
        if let push { send(push, on: 0x77) }
    }

    func query(_ m: [UInt8]) {
        let q = m[0]
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

    /// Sends a message as a camera does: general header when it fits, extended-13 otherwise,
    /// continuation packets counting 0x80…0x8F.
    func send(_ message: [UInt8], on short: UInt16) {
        guard let link = state.withLock({ $0.link }) else { return }
        let header: GoProStartHeader = message.count <= 31 ? .general : .extended13
        guard let packets = try? GoProPacketizer.packetize(message, startHeader: header, continuation: .counting) else { return }
        for p in packets { link.notify(Self.gp(short), Array(p)) }
    }
}
