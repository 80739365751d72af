// PLACEHOLDER — replaced by the real AdapterSet
//
// Only the API the real AdapterSet will have (issue 14 §1), so that the runtime can build one
// before it lands. Every call goes to the first member: no choosing, no pins, no limits. Drop
// this commit when the real file is merged.

import Logging

/// PLACEHOLDER — replaced by the real AdapterSet: forwards everything to the first member.
public final class AdapterSet: BLECentral, BLEAdapterControl, Sendable {
    public struct Member: Sendable {
        public var name: String
        public var central: any BLECentral
        public var maxConnections: Int
        public init(name: String, central: any BLECentral, maxConnections: Int) {
            self.name = name
            self.central = central
            self.maxConnections = maxConnections
        }
    }

    let members: [Member]
    let pins: [String: String]
    let logger: Logger

    /// - pins: device address (upper case) → adapter name, from the devices' `adapter` key.
    public init(_ members: [Member], pins: [String: String] = [:], logger: Logger = Logger(label: "gatt2mqtt.adapters")) {
        precondition(!members.isEmpty, "an AdapterSet needs at least one member")
        self.members = members
        self.pins = pins
        self.logger = logger
    }

    var first: any BLECentral { members[0].central }

    public func connect(address: String, notify: [CharacteristicID], timeout: Duration) async throws(BLEError) -> any BLELink {
        try await first.connect(address: address, notify: notify, timeout: timeout)
    }

    public func connect(address: String, notify: [CharacteristicID], pair: Bool, timeout: Duration) async throws(BLEError) -> any BLELink {
        try await first.connect(address: address, notify: notify, pair: pair, timeout: timeout)
    }

    func control() throws(BLEError) -> any BLEAdapterControl {
        guard let c = first.adapterControl else { throw BLEError(.notSupported, "\(members[0].name) has no adapter control") }
        return c
    }

    public func scan() async throws(BLEError) -> BLEScan { try await control().scan() }

    public func pair(address: String, timeout: Duration) async throws(BLEError) {
        try await control().pair(address: address, timeout: timeout)
    }

    public func forget(address: String) async throws(BLEError) { try await control().forget(address: address) }
}
