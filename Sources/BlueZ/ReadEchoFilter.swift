/// Separates device notifications from the `PropertiesChanged(Value)` bluetoothd emits after
/// every `ReadValue` (spec/bluez.md behaviour 3). One per characteristic path, held by the client.
///
/// The echo may arrive before or after the read's reply. While a read is in flight, values are
/// held back; when the read's result is known, one held value equal to it is dropped as the echo
/// and the rest are released in order. If the echo has not arrived yet, the next signal equal to
/// the result is dropped instead.
public struct ReadEchoFilter: Sendable, Equatable {
    var readsInFlight = 0
    var held: [[UInt8]] = []
    var expected: [[UInt8]] = []
    /// At most this many read results wait for their echo (older ones are forgotten).
    static let expectedLimit = 8

    public init() {}

    /// A ReadValue is about to be sent.
    public mutating func beginRead() { readsInFlight += 1 }

    /// A value signal arrived; returns the values to deliver as notifications now.
    public mutating func signal(_ value: [UInt8]) -> [[UInt8]] {
        if let i = expected.firstIndex(of: value) {
            expected.remove(at: i)
            return []
        }
        if readsInFlight > 0 {
            held.append(value)
            return []
        }
        return [value]
    }

    /// The read ended with `result` (nil: it failed, no echo will come); returns released values.
    public mutating func endRead(_ result: [UInt8]?) -> [[UInt8]] {
        readsInFlight = max(0, readsInFlight - 1)
        if let result {
            if let i = held.firstIndex(of: result) {
                held.remove(at: i)
            } else {
                expected.append(result)
                if expected.count > Self.expectedLimit { expected.removeFirst() }
            }
        }
        guard readsInFlight == 0 else { return [] }
        defer { held = [] }
        return held
    }

    /// The link went down: nothing pending survives it.
    public mutating func reset() { self = ReadEchoFilter() }
}
