import DBus

/// One GATT service of a device as BlueZ's object tree shows it, with its characteristics (what
/// `gatt2mqtt gatt --services` prints).
public struct GattServiceListing: Sendable, Equatable {
    /// One characteristic: its UUID and its flags (`read`, `write`, `notify`…) in BlueZ's order.
    public struct Characteristic: Sendable, Equatable {
        public var uuid: String
        public var flags: [String]
    }

    public var uuid: String
    public var primary: Bool
    /// The service's characteristics, in object-path order.
    public var characteristics: [Characteristic]
}

extension BlueZClient {
    /// The device's services and their characteristics from the cached object tree, in object-path
    /// order (the order BlueZ numbers them in). A property BlueZ did not give reads `?` (UUID) or
    /// empty (flags); objects that are neither (descriptors) are left out.
    public func gattServices(of device: BlueZDevice) -> [GattServiceListing] {
        let below = objects.filter { $0.key.isDescendant(of: device.path) }.sorted { $0.key < $1.key }
        var services: [GattServiceListing] = []
        for (_, interfaces) in below {
            if let s = interfaces[Self.service1] {
                services.append(GattServiceListing(uuid: s["UUID"]?.stringValue ?? "?", primary: s["Primary"]?.boolValue == true,
                                                   characteristics: []))
            } else if let c = interfaces[Self.char1], !services.isEmpty {
                let flags = c["Flags"]?.arrayItems?.compactMap { $0.stringValue } ?? []
                services[services.count - 1].characteristics.append(.init(uuid: c["UUID"]?.stringValue ?? "?", flags: flags))
            }
        }
        return services
    }
}
