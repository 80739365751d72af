extension BlueZSimulator.Faults {
    /// The fault names ``set(_:_:)`` accepts (the `gatt2mqtt simulate --fault` vocabulary; the
    /// D-Bus `SetFaults` keys are their CamelCase forms).
    public static let names = ["refuse-connections", "refuse-pairing", "silent", "drop-link-on-write", "reply-delay-ms",
                               "drop-notification", "duplicate-notification"]

    /// Sets one fault by name from text: `refuse-connections`, `refuse-pairing` and `silent` take `true`/`false`;
    /// `drop-link-on-write`, `drop-notification`, `duplicate-notification` take N ≥ 0 (0 clears);
    /// `reply-delay-ms` takes milliseconds. Unknown names and bad values throw
    /// ``BlueZSimulatorError/invalidFault(_:)``.
    public mutating func set(_ name: String, _ value: String) throws(BlueZSimulatorError) {
        func flag() throws(BlueZSimulatorError) -> Bool {
            switch value.lowercased() {
            case "true", "1", "yes", "on": return true
            case "false", "0", "no", "off": return false
            default: throw .invalidFault("\(name)=\(value): expected true or false")
            }
        }
        func count() throws(BlueZSimulatorError) -> Int {
            guard let n = Int(value), n >= 0, n <= Int(UInt32.max) else {
                throw .invalidFault("\(name)=\(value): expected a whole number ≥ 0")
            }
            return n
        }
        switch name {
        case "refuse-connections": refuseConnections = try flag()
        case "refuse-pairing": refusePairing = try flag()
        case "silent": silent = try flag()
        case "drop-link-on-write": dropLinkOnWrite = try count().nonZero
        case "reply-delay-ms": replyDelay = .milliseconds(Int64(try count()))
        case "drop-notification": dropNotification = try count().nonZero
        case "duplicate-notification": duplicateNotification = try count().nonZero
        default: throw .invalidFault("unknown fault \"\(name)\" (known: \(Self.names.joined(separator: ", ")))")
        }
    }
}

extension Int {
    fileprivate var nonZero: Int? { self == 0 ? nil : self }
}
